"""Flux Standard Duration (FSD): `5s`, `0.5m`, `2h`, `1d`, `100ms`, or a bare number of seconds."""

from __future__ import annotations

import math
import re

_FSD = re.compile(r"^\s*(?P<num>[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(?P<unit>ms|s|m|h|d)?\s*$", re.ASCII)
_SPACE = " \t\n\v\f\r"
"""ASCII white space only (re.ASCII's \\s), as RE2 has it: the MiniCluster CRD checks durations with RE2."""
_SCALE = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_fsd(text: str) -> float:
    """Seconds as a float; `inf`/`infinity` is math.inf. ValueError names the bad text."""
    lowered = text.strip(_SPACE).lower()
    if lowered in ("inf", "infinity"):
        return math.inf
    match = _FSD.fullmatch(text)
    if not match:
        raise ValueError(f"{text!r} is not a duration (expected e.g. '5s', '100ms', '2m', '1h', '1d')")
    return float(match["num"]) * _SCALE[match["unit"] or "s"]
