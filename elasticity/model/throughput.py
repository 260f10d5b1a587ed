"""The throughput model of CPU multiplexing (REFERENCE.md section 6), pure.

N concurrent simulations of R ranks on M nodes of C cores load the nodes to rho_N = N R / (M C). Each one
then takes T_N = T_1 (1 + beta (rho_N - rho_1)) and together they run Theta(N) = N T_1 / T_N =
N / (1 + beta (rho_N - rho_1)) times as many simulations per unit time as one at a time. beta is how much a
simulation slows down per unit of extra load: 0 when ranks mostly wait (their CPU is reclaimable), large
when they compete for cores.

Past saturation the line over-predicts Theta. One simulation alone keeps u = sum_i d_i / (M C) of the cores busy
(d_i its ranks' PMPI duty cycles); N of them want N u, and once N u > 1 no scheduler can run them faster than
their share, so each stretches by at least N u. With that demand known the model is
T_N = T_1 (S_N + beta (rho_N - rho_1)), S_N = max(1, N u) / max(1, u): the processor-sharing stretch plus the
paper's contention term. It is the paper's model exactly while N u <= 1 (u = 0, "unknown", is the paper's).
On bench_multiplex (u = 0.48, beta = 0.108 from N = 2) the line predicts Theta(3) = 2.09 where 1.64 was
measured; with S_3 = 1.44 it predicts 1.60.

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
LOAD_RANGE = (1e-12, 1e12)
"""R / (M C), ranks per core, a geometry may give: far past any real cluster either way, and inside it every load,
its square and beta stay ordinary floats (a denormal C made rho infinite and beta NaN; C = 1e308 divided by 0)."""


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
        load = self.ranks / (self.nodes * self.cores)
        if not LOAD_RANGE[0] <= load <= LOAD_RANGE[1]:
            raise ValueError(
                f"cores {self.cores:g} on {self.nodes} nodes for {self.ranks} ranks is {load:g} ranks per core, "
                f"outside [{LOAD_RANGE[0]:g}, {LOAD_RANGE[1]:g}]"
            )

    def rho(self, n: int) -> float:
        """Load rho_N = N R / (M C): ranks per core when N simulations run at once."""
        return n * self.ranks / (self.nodes * self.cores)

    def extra_load(self, n: int) -> float:
        """rho_N - rho_1, the load the other N-1 simulations add."""
        return self.rho(n) - self.rho(1)

    def demand(self, duty: Sequence[float]) -> float:
        """u: the share of the M C cores one simulation keeps busy, from its ranks' duty cycles (each in 0..1)."""
        if len(duty) == 0:
            raise ValueError("duty cycles: at least one rank's is needed")
        for rank, d in enumerate(duty):
            if not 0 <= d <= 1:
                raise ValueError(f"duty cycle of rank {rank} must lie in [0, 1], got {d:g}")
        return sum(duty) / (self.nodes * self.cores)


def check_demand(demand: float) -> float:
    if not math.isfinite(demand) or demand < 0:
        raise ValueError(f"CPU demand must be a non-negative number, got {demand:g}")
    return float(demand)


def stretch(n: int, demand: float) -> float:
    """S_N = max(1, N u) / max(1, u): how much N simulations wanting N u of the cores must stretch (S_1 = 1)."""
    _check_n(n)
    return max(1.0, n * demand) / max(1.0, demand)


@dataclass(frozen=True)
class ThroughputModel:
    """A fitted beta with its standard error, and what it predicts."""

    beta: float
    beta_stderr: float
    t1: float
    geometry: Geometry
    demand: float = 0.0
    """u, the share of the cores one simulation keeps busy (Geometry.demand); 0 = unknown: the paper's line."""

    def __post_init__(self) -> None:
        check_demand(self.demand)

    def slowdown(self, n: int) -> float:
        """T_N / T_1 = S_N + beta (rho_N - rho_1): how much longer each simulation takes when N share the nodes."""
        return stretch(n, self.demand) + self.beta * self.geometry.extra_load(n)

    def makespan(self, n: int) -> float:
        """Predicted T_N."""
        return self.t1 * self.slowdown(n)

    def theta(self, n: int) -> float:
        """Throughput gain Theta(N) = N / (S_N + beta (rho_N - rho_1)); Theta(1) = 1."""
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
    for n, t in enumerate(values[1:], start=2):
        if not math.isfinite(t / values[0]):  # a denormal T_1: T_N / T_1 is infinite, and beta with it
            raise ValueError(f"makespan for N={n} ({t:g} s) is too many times N=1's ({values[0]:g} s) to compare")
    return values


def fit_beta(makespans: Sequence[float], geometry: Geometry, demand: float = 0.0) -> ThroughputModel:
    """Least-squares beta (>= 0) and its standard error from makespans[i] measured with N = i + 1.

    With a demand u, what the stretch S_N already explains is taken out first: y_N = T_N / T_1 - S_N. A u that
    some measured N contradicts (it ran faster than its stretch allows: a profile taken under a CPU limit reads
    high) is lowered to the largest u the makespans allow.
    """
    values = check_makespans(makespans)
    demand = check_demand(demand)
    t1 = values[0]
    if demand <= 1:
        allowed = min(max(1.0, t / t1) / n for n, t in enumerate(values[1:], start=2))
        if allowed < demand * (1 - 1e-9):  # not for rounding: model makespans give back their own u
            demand = allowed
    xs = [geometry.extra_load(n) for n in range(2, len(values) + 1)]
    ys = [t / t1 - stretch(n, demand) for n, t in enumerate(values[1:], start=2)]
    sxx = sum(x * x for x in xs)
    beta = max(0.0, sum(x * y for x, y in zip(xs, ys, strict=True)) / sxx)
    dof = len(xs) - 1
    if dof <= 0:
        stderr = 0.0
    else:
        # d * d, not d ** 2: a float product overflows to inf (refused below), a float power raises OverflowError
        residual = sum((y - beta * x) * (y - beta * x) for x, y in zip(xs, ys, strict=True))
        stderr = math.sqrt(residual / dof / sxx)
    if not (math.isfinite(beta) and math.isfinite(stderr)):
        raise ValueError(
            f"makespans {values} give no finite beta for R={geometry.ranks} ranks on M={geometry.nodes} nodes "
            f"of C={geometry.cores:g} cores"
        )
    return ThroughputModel(beta=beta, beta_stderr=stderr, t1=t1, geometry=geometry, demand=demand)


def beta_from_pair(t1: float, t2: float, geometry: Geometry, demand: float = 0.0) -> float:
    """beta exactly from one N=1 and one N=2 makespan."""
    return fit_beta([t1, t2], geometry, demand).beta


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
    if not (cpu_per_simulation_m > 0 and math.isfinite(cpu_per_simulation_m)):
        raise ValueError(f"CPU per simulation must be a positive number, got {cpu_per_simulation_m}m")
    if not budget_m >= 0:
        raise ValueError(f"CPU budget must be a non-negative number, got {budget_m}m")
    room = budget_m / cpu_per_simulation_m  # inf for a tiny request or an unlimited budget: compare, never floor it
    limit = n_max if room >= n_max else max(1, math.floor(room + 1e-9))
    best, best_theta = 1, model.theta(1)
    for n in range(2, limit + 1):
        if threshold is not None and model.efficiency(n) < threshold - 1e-12:
            break
        theta = model.theta(n)
        if theta > best_theta + 1e-12:
            best, best_theta = n, theta
    return best


def predictions(model: ThroughputModel, n_values: Sequence[int]) -> list[dict[str, float | int]]:
    """[{"n", "theta", "makespan", "stretch"}] for each N (the JSON shape of `minicluster model fit --json`)."""
    return [
        {"n": n, "theta": model.theta(n), "makespan": model.makespan(n), "stretch": stretch(n, model.demand)}
        for n in n_values
    ]
