"""Fairness between co-located simulations: move CPU toward the slowest one in bounded steps (pure).

Progress is compared relative to each simulation's own pace when it ran with its full, unshared allocation
(or, lacking that, in absolute iterations per second), so a smaller mesh is not mistaken for a favoured one.
When the slowest/fastest ratio exceeds the threshold, one step moves CPU from the fastest simulation to the
slowest: at most `max_step` (25%) of the slow one's request, never pushing the fast one below its floor, and
only as much as the gap asks for. The caller applies at most one step per interval and re-measures: steps are
bounded so a noisy rate cannot swing the allocation, and every step is reversible by the next.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

DEFAULT_FAIRNESS_THRESHOLD = 1.10
MAX_STEP_FRACTION = 0.25


@dataclass(frozen=True)
class FairnessStep:
    """Move `millicores` of request from `donor` to `receiver` (the caller spreads it over their pods)."""

    receiver: str
    donor: str
    millicores: int
    ratio: float
    """fastest / slowest normalized progress before the step."""


def progress_ratio(rates: Mapping[str, float], reference: Mapping[str, float] | None = None) -> float:
    """fastest / slowest progress (normalized by each one's reference pace when given); 1.0 for < 2."""
    normalized = _normalized(rates, reference)
    if len(normalized) < 2:
        return 1.0
    slow = min(normalized.values())
    fast = max(normalized.values())
    if slow <= 0:
        return float("inf")
    return fast / slow


def _normalized(rates: Mapping[str, float], reference: Mapping[str, float] | None) -> dict[str, float]:
    """Each rate over its reference pace; a rate that is no finite number (or is one only over a tiny reference)
    takes no part: two infinite paces compared gave a NaN ratio, and a NaN step."""
    out = {}
    for sim, rate in rates.items():
        base = (reference or {}).get(sim)
        value = rate / base if base is not None and base > 0 and math.isfinite(base) else rate
        if math.isfinite(value):
            out[sim] = value
    return out


def fairness_step(
    rates: Mapping[str, float],
    requests_m: Mapping[str, int],
    *,
    threshold: float = DEFAULT_FAIRNESS_THRESHOLD,
    reference: Mapping[str, float] | None = None,
    floor_m: int = 10,
    max_step: float = MAX_STEP_FRACTION,
) -> FairnessStep | None:
    """The next bounded step toward fairness, or None when the ratio is within the threshold.

    rates: iterations per second per simulation (only simulations with a measured rate take part);
    requests_m: each simulation's total CPU request now (millicores, over all its pods).
    """
    if threshold < 1:
        raise ValueError(f"fairness threshold is a slowest/fastest ratio and must be >= 1, got {threshold}")
    if not 0 < max_step <= MAX_STEP_FRACTION:
        raise ValueError(f"max_step must lie in (0, {MAX_STEP_FRACTION}], got {max_step}")
    sims = [s for s in rates if s in requests_m and rates[s] >= 0 and math.isfinite(rates[s])]
    normalized = _normalized({s: rates[s] for s in sims}, reference)
    if len(normalized) < 2:
        return None
    slow = min(normalized, key=lambda s: (normalized[s], s))
    fast = max(normalized, key=lambda s: (normalized[s], s))
    ratio = progress_ratio({s: rates[s] for s in sims}, reference)
    if ratio <= threshold or slow == fast:
        return None
    # Rates scale roughly with CPU while a simulation is CPU-bound: to close a gap of `ratio` the slow one
    # needs about (ratio - 1) more of its request; bounded by max_step and by the donor's floor.
    wanted = requests_m[slow] * min(max_step, ratio - 1.0) if ratio != float("inf") else requests_m[slow] * max_step
    available = max(0, requests_m[fast] - floor_m)
    amount = math.floor(min(wanted, available) + 1e-9)
    if amount <= 0:
        return None
    return FairnessStep(receiver=slow, donor=fast, millicores=amount, ratio=ratio)
