"""The throughput model of CPU multiplexing (REFERENCE.md section 6), pure.

N concurrent simulations of R ranks on M nodes of C cores load the nodes to rho_N = N R / (M C). Each one
then takes T_N = T_1 (1 + beta (rho_N - rho_1)) and together they run Theta(N) = N T_1 / T_N =
N / (1 + beta (rho_N - rho_1)) times as many simulations per unit time as one at a time. beta is how much a
simulation slows down per unit of extra load: 0 when ranks mostly wait (their CPU is reclaimable), large
when they compete for cores.

beta is fitted by least squares on makespans measured for N = 1..k: with y_N = T_N / T_1 - 1 and
x_N = rho_N - rho_1 the model is the line y = beta x through the origin, so beta = sum x y / sum x^2 and
its standard error is sqrt(s^2 / sum x^2), s^2 the residual variance on k - 2 degrees of freedom. One N=2
run gives beta exactly (standard error 0). beta is constrained to be >= 0: co-location never speeds a
simulation up, so a negative estimate (measurement noise) is clipped, which is the 1-D non-negative
least-squares solution.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

DEFAULT_EFFICIENCY_THRESHOLD = 0.85
DEFAULT_MAX_N = 64
"""The largest N the knee and the best-N searches consider (beta = 0 would make every N efficient)."""


@dataclass(frozen=True)
class Geometry:
    """R ranks per simulation on M nodes of C cores each."""

    ranks: int
    nodes: int
    cores: float

    def __post_init__(self) -> None:
        if self.ranks < 1:
            raise ValueError(f"ranks must be at least 1, got {self.ranks}")
        if self.nodes < 1:
            raise ValueError(f"nodes must be at least 1, got {self.nodes}")
        if not self.cores > 0 or not math.isfinite(self.cores):
            raise ValueError(f"cores must be positive, got {self.cores}")

    def rho(self, n: int) -> float:
        """Load rho_N = N R / (M C): ranks per core when N simulations run at once."""
        return n * self.ranks / (self.nodes * self.cores)

    def extra_load(self, n: int) -> float:
        """rho_N - rho_1, the load the other N-1 simulations add."""
        return self.rho(n) - self.rho(1)


@dataclass(frozen=True)
class ThroughputModel:
    """A fitted beta with its standard error, and what it predicts."""

    beta: float
    beta_stderr: float
    t1: float
    geometry: Geometry

    def slowdown(self, n: int) -> float:
        """T_N / T_1: how much longer each simulation takes when N share the nodes."""
        _check_n(n)
        return 1.0 + self.beta * self.geometry.extra_load(n)

    def makespan(self, n: int) -> float:
        """Predicted T_N."""
        return self.t1 * self.slowdown(n)

    def theta(self, n: int) -> float:
        """Throughput gain Theta(N) = N / (1 + beta (rho_N - rho_1)); Theta(1) = 1."""
        return n / self.slowdown(n)

    def efficiency(self, n: int) -> float:
        """Theta(N) / N, the fraction of ideal linear gain."""
        return 1.0 / self.slowdown(n)

    def knee(self, threshold: float = DEFAULT_EFFICIENCY_THRESHOLD, n_max: int = DEFAULT_MAX_N) -> int:
        """The largest N (up to n_max) whose efficiency stays at or above the threshold; at least 1."""
        return knee(self, threshold, n_max)

    def best_n(
        self,
        cpu_per_simulation_m: float,
        budget_m: float,
        threshold: float | None = None,
    ) -> int:
        """best_n(self, ...): the N with the highest Theta that fits the CPU budget."""
        return best_n(self, cpu_per_simulation_m, budget_m, threshold)


def _check_n(n: int) -> None:
    if n < 1:
        raise ValueError(f"N must be at least 1, got {n}")


def check_makespans(makespans: Sequence[float]) -> list[float]:
    """The makespans as floats, or ValueError naming what is wrong (the CLI turns it into exit code 2)."""
    values = [float(t) for t in makespans]
    if len(values) < 2:
        raise ValueError(f"need makespans for N = 1..k with k >= 2, got {len(values)}")
    for n, t in enumerate(values, start=1):
        if not math.isfinite(t) or t <= 0:
            raise ValueError(f"makespan for N={n} must be a positive number of seconds, got {t:g}")
    return values


def fit_beta(makespans: Sequence[float], geometry: Geometry) -> ThroughputModel:
    """Least-squares beta (>= 0) and its standard error from makespans[i] measured with N = i + 1."""
    values = check_makespans(makespans)
    t1 = values[0]
    xs = [geometry.extra_load(n) for n in range(2, len(values) + 1)]
    ys = [t / t1 - 1.0 for t in values[1:]]
    sxx = sum(x * x for x in xs)
    beta = max(0.0, sum(x * y for x, y in zip(xs, ys, strict=True)) / sxx)
    dof = len(xs) - 1
    if dof <= 0:
        stderr = 0.0
    else:
        residual = sum((y - beta * x) ** 2 for x, y in zip(xs, ys, strict=True))
        stderr = math.sqrt(residual / dof / sxx)
    return ThroughputModel(beta=beta, beta_stderr=stderr, t1=t1, geometry=geometry)


def beta_from_pair(t1: float, t2: float, geometry: Geometry) -> float:
    """beta exactly from one N=1 and one N=2 makespan."""
    return fit_beta([t1, t2], geometry).beta


def measured_theta(makespans: Sequence[float]) -> list[float]:
    """Theta(N) = N T_1 / T_N as measured."""
    values = [float(t) for t in makespans]
    if not values or any(not math.isfinite(t) or t <= 0 for t in values):
        raise ValueError("measured makespans must be positive numbers of seconds")
    return [n * values[0] / t for n, t in enumerate(values, start=1)]


def knee(model: ThroughputModel, threshold: float = DEFAULT_EFFICIENCY_THRESHOLD, n_max: int = DEFAULT_MAX_N) -> int:
    """Largest N in [1, n_max] with Theta(N)/N >= threshold (efficiency only falls as N grows)."""
    if not 0 < threshold <= 1:
        raise ValueError(f"efficiency threshold must lie in (0, 1], got {threshold}")
    _check_n(n_max)
    best = 1
    for n in range(2, n_max + 1):
        if model.efficiency(n) < threshold - 1e-12:
            break
        best = n
    return best


def best_n(
    model: ThroughputModel,
    cpu_per_simulation_m: float,
    budget_m: float,
    threshold: float | None = None,
    n_max: int = DEFAULT_MAX_N,
) -> int:
    """The N with the highest predicted Theta whose total request N x cpu fits the budget (smallest on ties).

    With a threshold, only N whose efficiency stays at or above it are considered. One simulation always
    runs (N = 1), even when it alone exceeds the budget: the budget governs packing more, not running at all.
    """
    if not cpu_per_simulation_m > 0:
        raise ValueError(f"CPU per simulation must be positive, got {cpu_per_simulation_m}m")
    if budget_m < 0:
        raise ValueError(f"CPU budget must be non-negative, got {budget_m}m")
    limit = max(1, min(n_max, math.floor(budget_m / cpu_per_simulation_m + 1e-9)))
    best, best_theta = 1, model.theta(1)
    for n in range(2, limit + 1):
        if threshold is not None and model.efficiency(n) < threshold - 1e-12:
            break
        theta = model.theta(n)
        if theta > best_theta + 1e-12:
            best, best_theta = n, theta
    return best


def predictions(model: ThroughputModel, n_values: Sequence[int]) -> list[dict[str, float | int]]:
    """[{"n", "theta", "makespan"}] for each N (the JSON shape of `minicluster model fit --json`)."""
    return [{"n": n, "theta": model.theta(n), "makespan": model.makespan(n)} for n in n_values]
