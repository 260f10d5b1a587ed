"""The one CPU request -> cpu.shares -> cgroup v2 weight mapping (REFERENCE.md section 4).

- cgroup v1: shares = milliCPU * 1024 // 1000, clamped to [2, 262144] (the kubelet's MilliCPUToShares); no
  request (0m) gets the minimum, 2.
- cgroup v2, old linear runc/crun conversion: weight = 1 + (shares - 2) * 9999 // 262142.
- cgroup v2, runc >= 1.3.2 / crun >= 1.23: l = log2(shares), weight = ceil(10^((l^2 + 125 l)/612 - 7/34)),
  which maps one CPU (1024 shares) to 100, the cgroup v2 default. Not proportional: 1000m:100m gives 100:17.

The value at 0: shares are clamped to [2, 262144] before conversion, so 0 shares (or a 0m request) gives the
smallest weight the kernel accepts, 1, under both v2 formulas. A cgroup's weight can never be 0, and the kubelet
never hands the runtime fewer than 2 shares, so 1 is what a pod without a request really runs with.

The local backend (cgroups, nice levels) and the CPU allocation policy both call these functions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:  # numpy only for the vectorized look-ups: the CLI and the backends import this module on every call
    import numpy as np

Formula = Literal["v1", "v2-linear", "v2-nonlinear"]
"""Which value the kernel compares: cpu.shares (v1) or cpu.weight under one of the two v2 conversions."""
V2Formula = Literal["linear", "nonlinear"]
FORMULAS: tuple[Formula, ...] = ("v1", "v2-linear", "v2-nonlinear")
V2_FORMULAS: tuple[V2Formula, ...] = ("linear", "nonlinear")

MIN_SHARES = 2
MAX_SHARES = 262144
SHARES_PER_CPU = 1024
MILLI_PER_CPU = 1000
MIN_WEIGHT = 1
MAX_WEIGHT = 10000
#: The largest request whose shares are below MAX_SHARES; above it every formula saturates.
MAX_MILLICORES = MAX_SHARES * MILLI_PER_CPU // SHARES_PER_CPU

# Linux CFS: each nice step changes a task's weight by about 1.25x; nice 0 has weight 1024 (one CPU's worth).
NICE_STEP = 1.25
NICE_MIN = -20
NICE_MAX = 19


def _clamp_shares(shares: int) -> int:
    return max(MIN_SHARES, min(MAX_SHARES, shares))


def milli_to_shares(millicores: int) -> int:
    """cgroup v1 cpu.shares for a CPU request, as the kubelet computes it (no request -> the minimum, 2)."""
    if millicores <= 0:
        return MIN_SHARES
    return _clamp_shares(millicores * SHARES_PER_CPU // MILLI_PER_CPU)


def shares_to_milli(shares: int) -> int:
    """The request a cpu.shares value stands for (the kubelet's sharesToMilliCPU: rounded up; the minimum -> 0)."""
    if shares <= MIN_SHARES:
        return 0
    return math.ceil(shares * MILLI_PER_CPU / SHARES_PER_CPU)


def shares_to_weight_linear(shares: int) -> int:
    """cgroup v2 cpu.weight by the old linear conversion (runc < 1.3.2, crun < 1.23); 0 shares -> 1."""
    return 1 + ((_clamp_shares(shares) - 2) * 9999) // 262142


def shares_to_weight_nonlinear(shares: int) -> int:
    """cgroup v2 cpu.weight by the runtimes' current conversion (runc >= 1.3.2, crun >= 1.23); 0 shares -> 1."""
    shares = _clamp_shares(shares)
    if shares == MIN_SHARES:
        return MIN_WEIGHT
    if shares == MAX_SHARES:
        return MAX_WEIGHT
    lg = math.log2(shares)
    weight = math.ceil(math.pow(10.0, (lg * lg + 125.0 * lg) / 612.0 - 7.0 / 34.0))
    return max(MIN_WEIGHT, min(MAX_WEIGHT, weight))


def milli_to_weight(millicores: int, formula: str = "nonlinear") -> int:
    """cgroup v2 cpu.weight for a request under the linear or nonlinear conversion."""
    shares = milli_to_shares(millicores)
    if formula == "linear":
        return shares_to_weight_linear(shares)
    if formula == "nonlinear":
        return shares_to_weight_nonlinear(shares)
    raise ValueError(f"unknown cgroup v2 weight formula {formula!r} (linear or nonlinear)")


def kernel_weight(millicores: int, formula: Formula) -> int:
    """The value the kernel compares for a request: cpu.shares (v1) or cpu.weight (v2)."""
    if formula == "v1":
        return milli_to_shares(millicores)
    if formula in ("v2-linear", "v2-nonlinear"):
        return milli_to_weight(millicores, formula.removeprefix("v2-"))
    raise ValueError(f"unknown weight formula {formula!r}; choose one of {', '.join(FORMULAS)}")


def weight_to_milli(weight: int, formula: str = "nonlinear", hint: int | None = None) -> int:
    """The request a cpu.weight stands for: `hint` when it maps to this weight, else the smallest that does.

    The mapping is many-to-one, so reading a weight back cannot always recover the exact request; the hint
    (the desired request) tells "applied" from "something else".
    """
    if hint is not None and milli_to_weight(hint, formula) == weight:
        return hint
    convert = shares_to_weight_linear if formula == "linear" else shares_to_weight_nonlinear
    low, high = MIN_SHARES, MAX_SHARES
    while low < high:  # smallest shares with convert(shares) >= weight (both formulas are monotone)
        middle = (low + high) // 2
        if convert(middle) >= weight:
            high = middle
        else:
            low = middle + 1
    return shares_to_milli(low)


@cache
def weight_table(formula: Formula) -> np.ndarray:
    """kernel_weight(m) for m = 0..MAX_MILLICORES (non-decreasing), for inverse look-ups.

    Vectorized with the same float64 operations as the scalar functions (a test checks equality).
    """
    import numpy as np

    m = np.arange(MAX_MILLICORES + 1, dtype=np.int64)
    shares = np.clip(m * SHARES_PER_CPU // MILLI_PER_CPU, MIN_SHARES, MAX_SHARES)
    if formula == "v1":
        return shares
    if formula == "v2-linear":
        linear: np.ndarray = 1 + ((shares - 2) * 9999) // 262142
        return linear
    if formula == "v2-nonlinear":
        lg = np.log2(shares.astype(float))
        w = np.ceil(np.power(10.0, (lg * lg + 125.0 * lg) / 612.0 - 7.0 / 34.0)).astype(np.int64)
        w[shares <= MIN_SHARES] = MIN_WEIGHT
        w[shares >= MAX_SHARES] = MAX_WEIGHT
        clipped: np.ndarray = np.clip(w, MIN_WEIGHT, MAX_WEIGHT)
        return clipped
    raise ValueError(f"unknown weight formula {formula!r}; choose one of {', '.join(FORMULAS)}")


def kernel_weights(millicores: Sequence[int] | np.ndarray, formula: Formula) -> np.ndarray:
    """Vectorized kernel_weight."""
    import numpy as np

    m = np.clip(np.asarray(millicores, dtype=np.int64), 0, MAX_MILLICORES)
    return weight_table(formula)[m]


def milli_to_nice(millicores: int) -> int:
    """A nice level whose CFS weight approximates the request's shares relative to one CPU (nice 0)."""
    shares = milli_to_shares(millicores)
    nice = round(math.log(SHARES_PER_CPU / shares) / math.log(NICE_STEP))
    return max(NICE_MIN, min(NICE_MAX, nice))


def nice_to_milli(nice: int) -> int:
    """The request a nice level approximates (inverse of milli_to_nice, to the nearest step).

    Clamped to the kernel's nice range first: 1.25 ** 4000 overflows a float."""
    nice = max(NICE_MIN, min(NICE_MAX, nice))
    return max(0, round(MILLI_PER_CPU * NICE_STEP ** (-nice)))


def limit_to_quota(millicores: int, period_us: int = 100_000) -> int:
    """CFS quota in microseconds per period for a CPU limit (the kubelet's MilliCPUToQuota, min 1 ms)."""
    return max(1000, millicores * period_us // MILLI_PER_CPU)
