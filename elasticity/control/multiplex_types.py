"""The multiplexing controller's vocabulary: its knobs, what it observes, the actions it returns (pure data).

Split from `multiplex.py` so the planner reads as decisions only; the runner, the ports and the shells import
these types from here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from elasticity.policy.fairness import DEFAULT_FAIRNESS_THRESHOLD
from elasticity.policy.multiplex_requests import SimulationDemand

SimState = Literal["pending", "running", "done", "failed", "cancelled", "timeout"]
Terminal = Literal["done", "failed", "cancelled", "timeout"]
TERMINAL: tuple[Terminal, ...] = ("done", "failed", "cancelled", "timeout")
"""How a simulation ends: exactly one of these, decided once (MultiplexPlanner._end)."""
Phase = Literal["profile", "resize", "pack", "fairness", "watch", "done"]
ResizeAnswer = Literal["accepted", "in-progress", "deferred", "infeasible", "done"]


@dataclass(frozen=True)
class MultiplexConfig:
    """The controller's knobs (CLI flags and spec.multiplexing)."""

    ranks: int
    """MPI ranks per simulation (R)."""
    pods: tuple[int, ...]
    """Pod indexes the simulations run on."""
    cores_per_node: float
    nodes: int = 1
    max_simulations: int = 4
    """At most this many simulations run at once (--max)."""
    total_simulations: int | None = None
    """How many to run in all (default: max_simulations); more than max means early finishers make room."""
    profile_iterations: int = 50
    profile_together: int = 1
    """Simulations started at once before any profile (--profile-together): they split the rigid allocation in
    equal shares and are profiled side by side, so none waits K iterations for another's profile."""
    fairness: float = DEFAULT_FAIRNESS_THRESHOLD
    efficiency_threshold: float = 0.85
    equal_per_rank_m: float = 1000.0
    """The rigid allocation a rank gets before profiling (what a launcher without profiles would request)."""
    headroom: float = 1.2
    """need_i = duty_i x allocation_i x headroom, so a rank is not starved by noise in its profile."""
    floor_m: int = 10
    pod_overhead_m: int = 0
    """Added to every pod's request for what runs beside the ranks (the broker): keeps it responsive."""
    fairness_interval: float = 5.0
    settle_time: float = 3.0
    """Seconds after a start or a resize before progress rates are trusted again."""
    start_timeout: float = 60.0
    backoff_initial: float = 1.0
    backoff_max: float = 30.0
    max_deferrals: int = 6
    prior_beta: float | None = None
    """beta used before two load levels were observed (None: pack on headroom alone until then)."""
    max_retries: int = 2
    """A simulation that failed because a pod was lost (a follower killed) is resubmitted at most this often."""
    failure_grace: float = 5.0
    """Seconds a failure with no sign of a lost pod waits for one (a restart is counted after its back-off)."""

    def __post_init__(self) -> None:
        if self.ranks < 1 or not self.pods or self.cores_per_node <= 0 or self.max_simulations < 1:
            raise ValueError("need ranks >= 1, at least one pod, cores > 0 and max_simulations >= 1")
        if self.fairness < 1:
            raise ValueError(f"fairness is a slowest/fastest ratio and must be >= 1, got {self.fairness}")
        if self.profile_iterations < 1:
            raise ValueError(f"profile iterations must be at least 1, got {self.profile_iterations}")
        if not 1 <= self.profile_together <= self.max_simulations:
            raise ValueError(
                f"profile together must be between 1 and max ({self.max_simulations}), got {self.profile_together}"
            )
        if self.max_retries < 0:
            raise ValueError(f"retries must be at least 0, got {self.max_retries}")

    @property
    def total(self) -> int:
        return self.total_simulations if self.total_simulations is not None else self.max_simulations

    def block_placement(self) -> dict[int, tuple[int, ...]]:
        """Ranks over pods in blocks (how `flux submit -N M -n R` lays them out) until a profile says where."""
        pods = list(self.pods)
        per = math.ceil(self.ranks / len(pods))
        return {p: tuple(range(i * per, min(self.ranks, (i + 1) * per))) for i, p in enumerate(pods)}


@dataclass(frozen=True)
class Profile:
    """What the profiler measured for one simulation: each rank's steady duty cycle and its pod."""

    duty: tuple[float, ...]
    placement: Mapping[int, tuple[int, ...]]
    """pod index -> ranks on it (from the hostnames in the traces)."""
    allocation_m: tuple[float, ...] | None = None
    """CPU each rank held while profiled (default: the equal per-rank allocation)."""
    iteration_rate: float | None = None
    """Iterations per second while profiled (steady window), when the profiler's timestamps give it."""


@dataclass(frozen=True)
class SimulationView:
    """One simulation as observed now."""

    sim: str
    state: SimState
    iterations: int | None = None
    """Iterations completed so far (solver log or profiler stream); None when unknown."""
    profile: Profile | None = None
    reason: str = ""
    """Why it ended, in the job's words (state, exit code, exception, the first lines of its error output)."""
    lost: bool = False
    """It failed because a pod running its ranks was lost (the job's node-failure exception)."""


@dataclass(frozen=True)
class Observation:
    now: float
    simulations: Mapping[str, SimulationView]
    pod_requests_m: Mapping[int, int]
    allocatable_m: int
    """CPU the nodes can give these pods in total (millicores)."""
    restarts: int = 0
    pods_down: tuple[int, ...] = ()
    """Pods of the plan that are not running (failed, lost): nothing more is packed while any is down."""


@dataclass(frozen=True)
class StartSimulation:
    sim: str
    profile_iterations: int


@dataclass(frozen=True)
class CancelSimulation:
    sim: str
    reason: str


@dataclass(frozen=True)
class ResizePods:
    requests_m: dict[int, int]
    reason: str


@dataclass(frozen=True)
class SetJobShares:
    """Inside each pod, the CPU (as a weight) of each simulation's child cgroup."""

    shares_m: dict[int, dict[str, int]]


Action = StartSimulation | CancelSimulation | ResizePods | SetJobShares


@dataclass
class SimRecord:
    """What the planner remembers about one simulation."""

    sim: str
    submitted_at: float
    demand: SimulationDemand
    profiled: bool = False
    started_at: float | None = None
    finished_at: float | None = None
    state: SimState = "pending"
    samples: list[tuple[float, int, int]] = field(default_factory=list)
    """(time, iterations, simulations running) observations, for rates."""
    iterations: int | None = None
    """The last iteration count observed (the final one once it ended)."""
    reason: str = ""
    """Why it ended (empty for done)."""
    retries: int = 0
    restarts_at_submit: int = 0
    """Pod restarts counted when it was (re)submitted: more since then means a pod was lost under it."""
    pod_down: bool = False
    """A pod of the plan was seen down since it was (re)submitted."""
    failing_since: float | None = None
    """When its failure was first seen, while waiting `failure_grace` for a sign of a lost pod."""
    duty: tuple[float, ...] = ()
    """Its ranks' duty cycles once profiled: the throughput model's CPU demand."""


def parse_placement(hostnames: Sequence[str], pod_of_host: Mapping[str, int]) -> dict[int, tuple[int, ...]]:
    """pod index -> ranks, from each rank's hostname (the traces record it)."""
    out: dict[int, list[int]] = {}
    for rank, host in enumerate(hostnames):
        if host not in pod_of_host:
            raise ValueError(f"rank {rank} ran on {host!r}, which is not a pod of this MiniCluster")
        out.setdefault(pod_of_host[host], []).append(rank)
    return {p: tuple(r) for p, r in out.items()}
