"""The SLICE of `flux job last`: Python's `[start:stop:step]` over a user's jobs, newest first (flux-core's
job-manager.history.get takes the same text)."""

from __future__ import annotations

import re

from ..errors import InputError

_SLICE = re.compile(r"\[\s*(-?\d*)\s*(?::\s*(-?\d*)\s*)?(?::\s*(-?\d*)\s*)?\]")


class SliceError(InputError):
    """A SLICE that is not `[start:stop:step]`; the message quotes it."""


def parse_slice(text: str) -> slice:
    """`[:1]`, `[2:5]`, `[::-1]`, or `[i]` (that one job) as a Python slice."""
    match = _SLICE.fullmatch(text.strip())
    if match is None:
        raise SliceError(f"invalid slice {text!r} (expected [start:stop:step], e.g. [:5])")
    start, stop, step = (int(part) if part else None for part in match.groups())
    if ":" not in text:  # [i]: the one job at i
        if start is None:
            raise SliceError(f"invalid slice {text!r} (expected [start:stop:step], e.g. [:5])")
        return slice(start, start + 1 if start != -1 else None)
    if step == 0:
        raise SliceError(f"invalid slice {text!r}: step cannot be zero")
    return slice(start, stop, step)
