"""The paper's scenarios on a simulated cluster: placement decisions from the live policy, run times from a model.

Which pods a job gets, what they request and which node each lands on come from exactly the functions rendering
and the local backend use (elasticity.policy.placement): granularity selection, the MPI-aware layout, task-group
placement or the default scheduler's spreading, whole cores under exclusive CPUs. Pods are bound as a gang when
all fit (pending jobs are tried in submission order each time something changes, as pending pods are). How fast
a running job goes is a model, stated here so it can be argued with:

* shared CPUs cost every rank `shared_cpu_overhead` (context switches, migrations, cache refills);
* nodes have two sockets; with exclusive CPUs a worker's cores come from one socket when one has room (the
  kubelet's topology manager, best-effort), else from both; a rank whose worker spans both sockets, or that
  floats over them (shared CPUs), pays `numa_penalty` times its class's memory sensitivity;
* memory-bound ranks share their node's memory bandwidth (`node_bandwidth` ranks' worth at full speed);
* every job communicates a class-dependent share of its time, all to all, slowed by `cross_node_penalty` for
  the share of its rank pairs on different nodes and (network class) by `split_penalty` for the share on
  different workers of one node (loopback instead of shared memory);
* memory-bound ranks slow down by the worst of their nodes' bandwidth sharing; NUMA by any spanning worker.
A job's speed is recomputed at every event (a start or an end changes who shares what).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from elasticity.policy.placement import (
    NodeRoom,
    PlacementPolicy,
    ProfileClass,
    Unschedulable,
    WorkerRequest,
    form_task_groups,
    mpi_aware_layout,
    place_spread,
    place_task_groups,
    select_granularity,
)

CORE_MILLI = 1000
GiB = 1 << 30


@dataclass(frozen=True)
class Scenario:
    name: str
    exclusive: bool
    policy: PlacementPolicy
    task_groups: bool


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("NONE", False, "none", False),
    Scenario("CM", True, "none", False),
    Scenario("CM_S", True, "scale", False),
    Scenario("CM_G", True, "granularity", False),
    Scenario("CM_S_TG", True, "scale", True),
    Scenario("CM_G_TG", True, "granularity", True),
)


@dataclass(frozen=True)
class PlacementModel:
    shared_cpu_overhead: float = 0.12
    node_bandwidth: float = 4.0
    """Memory-bound ranks a node feeds at full speed; more share it."""
    communication: tuple[tuple[ProfileClass, float], ...] = (("cpu", 0.05), ("memory", 0.10), ("network", 0.60))
    cross_node_penalty: float = 1.5
    split_penalty: float = 0.5
    numa_penalty: float = 0.35
    memory_sensitivity: tuple[tuple[ProfileClass, float], ...] = (("cpu", 0.15), ("memory", 1.0), ("network", 0.3))

    def numa_share(self, kind: ProfileClass) -> float:
        return dict(self.memory_sensitivity)[kind]

    def communication_share(self, kind: ProfileClass) -> float:
        return dict(self.communication)[kind]


@dataclass(frozen=True)
class SimJob:
    name: str
    kind: ProfileClass
    ranks: int
    work: float
    """Seconds it runs alone, on one node, with exclusive cores."""
    submit: float
    memory_per_rank: int = GiB


@dataclass(frozen=True)
class JobOutcome:
    name: str
    kind: ProfileClass
    submit: float
    start: float
    end: float
    workers: int
    nodes: int

    @property
    def response(self) -> float:
        return self.end - self.submit


@dataclass(frozen=True)
class ScenarioResult:
    scenario: str
    jobs: tuple[JobOutcome, ...]

    @property
    def response_time(self) -> float:
        """Overall response time: the sum of every job's wait plus run time."""
        return sum(j.response for j in self.jobs)

    @property
    def makespan(self) -> float:
        return max(j.end for j in self.jobs) - min(j.submit for j in self.jobs)


@dataclass
class _Running:
    job: SimJob
    start: float
    remaining: float
    rank_node: dict[int, str]
    rank_worker: dict[int, int]
    requests: list[WorkerRequest]
    bound: dict[int, str]
    workers: int
    sockets: dict[int, dict[int, int]]
    """Worker -> socket -> cores it holds there (exclusive CPUs)."""
    rate: float = 1.0


@dataclass
class _Nodes:
    cores: int
    memory: int
    names: list[str]
    used_cpu: dict[str, int] = field(default_factory=dict)
    used_memory: dict[str, int] = field(default_factory=dict)
    socket_free: dict[str, list[int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        half = self.cores // 2
        self.socket_free = {n: [half, self.cores - half] for n in self.names}

    def pin(self, node: str, cores: int) -> dict[int, int]:
        """Cores for one worker: one socket if one has room (the fullest that fits), else both."""
        free = self.socket_free[node]
        fitting = [s for s in range(len(free)) if free[s] >= cores]
        if fitting:
            socket = min(fitting, key=lambda s: (free[s], s))
            free[socket] -= cores
            return {socket: cores}
        taken: dict[int, int] = {}
        for socket in sorted(range(len(free)), key=lambda s: -free[s]):
            part = min(cores - sum(taken.values()), free[socket])
            if part > 0:
                taken[socket] = part
                free[socket] -= part
        return taken

    def unpin(self, node: str, held: dict[int, int]) -> None:
        for socket, cores in held.items():
            self.socket_free[node][socket] += cores

    def rooms(self) -> list[NodeRoom]:
        return [
            NodeRoom(n, self.cores * CORE_MILLI - self.used_cpu.get(n, 0), self.memory - self.used_memory.get(n, 0))
            for n in self.names
        ]

    def take(self, requests: Sequence[WorkerRequest], bound: dict[int, str], sign: int = 1) -> None:
        for r in requests:
            node = bound[r.index]
            self.used_cpu[node] = self.used_cpu.get(node, 0) + sign * r.cpu_milli
            self.used_memory[node] = self.used_memory.get(node, 0) + sign * r.memory_bytes


def user_workers(ranks: int, cores_per_node: int) -> int:
    """The shape a user writes without a policy: one pod, or one per node when the ranks overflow a node."""
    return -(-ranks // cores_per_node)


def _try_start(job: SimJob, scenario: Scenario, nodes: _Nodes, now: float) -> _Running | None:
    node_count = len(nodes.names)
    shape = select_granularity(
        job.ranks,
        job.kind,
        scenario.policy,
        node_count,
        workers_given=user_workers(job.ranks, nodes.cores),
        cores_per_node=nodes.cores,
    )
    layout = mpi_aware_layout(job.ranks, shape.workers, job.ranks * CORE_MILLI, job.ranks * job.memory_per_rank)
    requests = [WorkerRequest(w.index, w.cpu_milli, w.memory_bytes) for w in layout.workers]
    try:
        if scenario.task_groups:
            bound = place_task_groups(requests, form_task_groups(requests, shape.groups), nodes.rooms())
        else:
            bound = place_spread(requests, nodes.rooms())
    except Unschedulable:
        return None
    nodes.take(requests, bound)
    sockets = {r.index: nodes.pin(bound[r.index], -(-r.cpu_milli // CORE_MILLI)) for r in requests}
    rank_worker = {r: w.index for w in layout.workers for r in w.ranks}
    rank_node = {r: bound[w] for r, w in rank_worker.items()}
    return _Running(job, now, job.work, rank_node, rank_worker, requests, bound, shape.workers, sockets)


def _pair_shares(run: _Running) -> tuple[float, float]:
    """Shares of the job's rank pairs on different nodes, and on different workers of one node (all-to-all)."""
    n = run.job.ranks
    if n < 2:
        return 0.0, 0.0
    per_node: dict[str, int] = {}
    per_worker: dict[int, int] = {}
    for rank, node in run.rank_node.items():
        per_node[node] = per_node.get(node, 0) + 1
        worker = run.rank_worker[rank]
        per_worker[worker] = per_worker.get(worker, 0) + 1
    pairs = n * (n - 1)
    same_node = sum(k * (k - 1) for k in per_node.values())
    same_worker = sum(k * (k - 1) for k in per_worker.values())
    return (pairs - same_node) / pairs, (same_node - same_worker) / pairs


def _rates(running: list[_Running], scenario: Scenario, model: PlacementModel) -> None:
    memory_ranks: dict[str, int] = {}
    for run in running:
        if run.job.kind == "memory":
            for node in run.rank_node.values():
                memory_ranks[node] = memory_ranks.get(node, 0) + 1
    for run in running:
        kind = run.job.kind
        time = 1.0 + (0.0 if scenario.exclusive else model.shared_cpu_overhead)
        if kind == "memory":
            time *= max(max(1.0, memory_ranks[node] / model.node_bandwidth) for node in set(run.rank_node.values()))
        if not scenario.exclusive or any(len(held) > 1 for held in run.sockets.values()):
            time += model.numa_penalty * model.numa_share(kind)
        cross_node, cross_worker = _pair_shares(run)
        time += model.communication_share(kind) * model.cross_node_penalty * cross_node
        if kind == "network":
            time += model.communication_share(kind) * model.split_penalty * cross_worker
        run.rate = 1.0 / time


def simulate_scenario(
    jobs: Sequence[SimJob],
    scenario: Scenario,
    nodes: int,
    cores_per_node: int,
    memory_per_node: int = 64 * GiB,
    model: PlacementModel | None = None,
) -> ScenarioResult:
    """Run the mix to completion under one scenario."""
    model = model or PlacementModel()
    pool = _Nodes(cores_per_node, memory_per_node, [f"node{i}" for i in range(nodes)])
    pending = sorted(jobs, key=lambda j: (j.submit, j.name))
    arrivals = list(pending)
    waiting: list[SimJob] = []
    running: list[_Running] = []
    done: list[JobOutcome] = []
    now = 0.0
    while arrivals or waiting or running:
        while arrivals and arrivals[0].submit <= now + 1e-9:
            waiting.append(arrivals.pop(0))
        for job in list(waiting):
            started = _try_start(job, scenario, pool, now)
            if started is not None:
                waiting.remove(job)
                running.append(started)
        if not running and not arrivals and waiting:
            raise ValueError(f"job {waiting[0].name} ({waiting[0].ranks} ranks) can never fit the cluster")
        _rates(running, scenario, model)
        next_arrival = arrivals[0].submit if arrivals else float("inf")
        next_end = min((now + r.remaining / r.rate for r in running), default=float("inf"))
        step_to = min(next_arrival, next_end)
        for run in running:
            run.remaining -= (step_to - now) * run.rate
        now = step_to
        for run in [r for r in running if r.remaining <= 1e-9]:
            running.remove(run)
            pool.take(run.requests, run.bound, sign=-1)
            for worker, held in run.sockets.items():
                pool.unpin(run.bound[worker], held)
            done.append(
                JobOutcome(
                    run.job.name,
                    run.job.kind,
                    run.job.submit,
                    run.start,
                    now,
                    run.workers,
                    len(set(run.bound.values())),
                )
            )
    return ScenarioResult(scenario.name, tuple(sorted(done, key=lambda o: o.name)))


def paper_mix(count: int = 20, seed: int = 7, mean_gap: float = 20.0) -> list[SimJob]:
    """A mixed run like the paper's: the three classes in turn, 4 to 16 ranks, Poisson arrivals."""
    rng = random.Random(seed)
    kinds: tuple[ProfileClass, ...] = ("cpu", "memory", "network")
    work = {"cpu": 120.0, "memory": 100.0, "network": 90.0}
    jobs = []
    t = 0.0
    for i in range(count):
        kind = kinds[i % 3]
        ranks = rng.choice((4, 8, 16))
        jobs.append(SimJob(f"{kind}-{i:02d}", kind, ranks, work[kind] * rng.uniform(0.8, 1.2), round(t, 3)))
        t += rng.expovariate(1.0 / mean_gap)
    return jobs
