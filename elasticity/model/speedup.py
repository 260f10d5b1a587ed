"""Runtime of a job run on a different number of nodes than it asked for (Amdahl's law).

Why Amdahl: the malleable-scheduling papers derive a job's acceptable sizes from a speedup model and an
efficiency threshold; Amdahl's law needs one parameter per job (the serial fraction ``s``) and is monotone,
so "smallest acceptable size" and "largest efficient size" are well defined:

- speedup ``S(n) = 1 / (s + (1 - s) / n)``, efficiency ``E(n) = S(n) / n``;
- run time at ``n`` nodes of a job that ran ``T0`` seconds on ``n0``: ``T(n) = T0 * S(n0) / S(n)``;
- preferred size = the size the job asked for (``n0``);
- maximum = the largest ``n`` (up to the machine) with ``E(n) >= efficiency_threshold``, never below ``n0``;
- minimum = the smallest ``n`` whose run time is at most ``max_slowdown`` times ``T(n0)``, never above ``n0``.

A resize may cost a fixed overhead (seconds during which the job makes no progress: checkpoint and restart
on the new size); 0 by default.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

DEFAULT_EFFICIENCY_THRESHOLD = 0.5
DEFAULT_MAX_SLOWDOWN = 2.0


@dataclass(frozen=True, slots=True)
class Amdahl:
    """Amdahl's law: a job whose serial fraction does not speed up with more nodes."""

    serial_fraction: float

    def __post_init__(self) -> None:
        if not 0.0 <= self.serial_fraction <= 1.0:
            raise ValueError(f"serial_fraction must be in [0, 1], got {self.serial_fraction}")

    def speedup(self, nodes: int) -> float:
        if nodes < 1:
            raise ValueError(f"nodes must be >= 1, got {nodes}")
        s = self.serial_fraction
        return 1.0 / (s + (1.0 - s) / nodes)

    def efficiency(self, nodes: int) -> float:
        return self.speedup(nodes) / nodes

    def runtime(self, runtime_at: float, at_nodes: int, nodes: int) -> float:
        """Run time on ``nodes`` of a job that takes ``runtime_at`` seconds on ``at_nodes``."""
        return runtime_at * self.speedup(at_nodes) / self.speedup(nodes)


@dataclass(frozen=True, slots=True)
class JobSize:
    """Acceptable sizes of a malleable job: start anywhere in [min, max], preferably at ``pref``."""

    min: int
    pref: int
    max: int

    def __post_init__(self) -> None:
        if not 1 <= self.min <= self.pref <= self.max:
            raise ValueError(f"need 1 <= min <= pref <= max, got {self.min}, {self.pref}, {self.max}")

    @property
    def malleable(self) -> bool:
        return self.min < self.max

    @classmethod
    def rigid(cls, nodes: int) -> JobSize:
        return cls(nodes, nodes, nodes)


def size_range(
    model: Amdahl,
    requested: int,
    machine: int,
    *,
    efficiency_threshold: float = DEFAULT_EFFICIENCY_THRESHOLD,
    max_slowdown: float = DEFAULT_MAX_SLOWDOWN,
) -> JobSize:
    """[min, pref, max] for a job that asked for ``requested`` nodes on a ``machine``-node cluster."""
    if not 1 <= requested <= machine:
        raise ValueError(f"requested size {requested} is outside [1, {machine}]")
    if not 0 < efficiency_threshold <= 1:
        raise ValueError(f"efficiency threshold must lie in (0, 1], got {efficiency_threshold}")
    if not (max_slowdown >= 1 and math.isfinite(max_slowdown)):
        raise ValueError(f"max slowdown must be a number >= 1, got {max_slowdown}")
    s = model.serial_fraction
    # E(n) >= e  <=>  s*n + (1 - s) <= 1/e  <=>  n <= (1/e - 1 + s) / s   (every n when s == 0). Compared before
    # dividing: a denormal s (or e) makes the quotient infinite, and floor(inf) raised OverflowError.
    slack = 1.0 / efficiency_threshold - 1.0 + s
    largest = machine if slack >= machine * s else math.floor(slack / s + 1e-9)
    top = max(requested, min(machine, largest))
    # T(n) <= k*T(n0)  <=>  S(n) >= S(n0)/k ; S is increasing, so search upwards (sizes are small integers).
    target = model.speedup(requested) / max_slowdown
    low = requested
    for n in range(1, requested + 1):
        if model.speedup(n) >= target - 1e-12:
            low = n
            break
    return JobSize(low, requested, top)
