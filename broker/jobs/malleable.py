"""A malleable job's contract: the node counts it accepts and how it is told to change its size, as jobspec
attributes set at submit (flux-core's `--setattr` nests dotted names, so both brokers see the same layout):

    flux submit -N 4 -n 4 --setattr=malleable.min=2 --setattr=malleable.pref=4 --setattr=malleable.max=8 \\
                [--setattr=malleable.signal=SIGUSR1] [--setattr=malleable.timeout=30s] ./malleable_jacobi ...

`attributes.system.malleable`: `min` <= `pref` <= `max` nodes (pref defaults to min), the signal that asks for a
resize (SIGUSR1) and how long the job has to answer it (60 s). A job asked to resize checkpoints at its next safe
point and exits; the controller (elasticity/control/malleable.py) submits it again on the new node count, from
its checkpoint. Parsed at submit: a contradiction is refused with the attribute's name, never found mid-run.
"""

from __future__ import annotations

import math
import signal
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from broker.fsd import parse_fsd

if TYPE_CHECKING:
    from broker.jobs.shapes import Jobspec

ATTRIBUTE = "attributes.system.malleable"
KEYS = ("min", "pref", "max", "signal", "timeout")
DEFAULT_SIGNAL = signal.SIGUSR1
DEFAULT_TIMEOUT = 60.0


@dataclass(frozen=True)
class MalleableSpec:
    """A malleable job's sizes and how it is told to checkpoint before a resize."""

    min: int
    pref: int
    max: int
    signal: int = int(DEFAULT_SIGNAL)
    timeout: float = DEFAULT_TIMEOUT
    """Seconds the job has to checkpoint once signalled; past them it keeps its size (the resize is dropped)."""


_ABSENT = object()
"""A key the malleable section leaves out (a JSON null is there, and wrong)."""


def _count(value: object, key: str) -> int | None:
    """The node count `value` of the section's `key`, None when absent; ValueError naming it when wrong."""
    if value is _ABSENT:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{ATTRIBUTE}.{key}: {value!r} is not a node count (a whole number of at least 1)")
    return value


def _signal(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value < signal.NSIG:
        return value
    text = str(value).upper()
    try:
        return int(signal.Signals[text if text.startswith("SIG") else f"SIG{text}"])
    except KeyError:
        raise ValueError(f"{ATTRIBUTE}.signal: {value!r} is not a signal (e.g. SIGUSR1)") from None


def _timeout(value: Any) -> float:
    try:
        seconds = float(value) if isinstance(value, int | float) and not isinstance(value, bool) else parse_fsd(value)
    except (ValueError, TypeError):
        raise ValueError(f"{ATTRIBUTE}.timeout: {value!r} is not a duration (e.g. 30s, 2m)") from None
    if not 0 < seconds < math.inf:
        raise ValueError(f"{ATTRIBUTE}.timeout: {value!r} must be positive and finite")
    return seconds


def malleable_spec(jobspec: Jobspec) -> MalleableSpec | None:
    """The job's malleable contract, None for a rigid job; ValueError naming the attribute when it is wrong."""
    section = jobspec.get("attributes", {}).get("system", {}).get("malleable")
    if section is None:
        return None
    if not isinstance(section, dict):
        raise ValueError(f"{ATTRIBUTE}: expected min, pref and max (e.g. --setattr=malleable.min=2), got {section!r}")
    unknown = sorted(set(section) - set(KEYS))
    if unknown:
        raise ValueError(f"{ATTRIBUTE}.{unknown[0]}: not a malleable attribute (expected {', '.join(KEYS)})")
    low, pref, high = (_count(section.get(key, _ABSENT), key) for key in ("min", "pref", "max"))
    if low is None or high is None:
        missing = "min" if low is None else "max"
        raise ValueError(f"{ATTRIBUTE}.{missing}: required (the fewest and the most nodes the job runs on)")
    if low > high:
        raise ValueError(f"{ATTRIBUTE}.min: {low} is above max ({high})")
    pref = low if pref is None else pref
    if not low <= pref <= high:
        raise ValueError(f"{ATTRIBUTE}.pref: {pref} is outside [min, max] = [{low}, {high}]")
    sig = _signal(section["signal"]) if "signal" in section else int(DEFAULT_SIGNAL)
    timeout = _timeout(section["timeout"]) if "timeout" in section else DEFAULT_TIMEOUT
    return MalleableSpec(low, pref, high, sig, timeout)
