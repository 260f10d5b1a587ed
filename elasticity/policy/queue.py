"""Queue policies: FCFS and EASY backfilling, as a pure function from a snapshot to the jobs to start."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from elasticity.model.resources import ResourceRequest
from elasticity.policy.allocate import Allocation, NodeCapacity, allocate, free_after, release
from elasticity.policy.scheduling.easy import QUEUE_POLICIES, QueuePolicy, plan_queue


@dataclass(frozen=True)
class Waiting:
    """A queued job as the broker's queue policy sees it."""

    jobid: int
    request: ResourceRequest
    duration: float
    """Requested time limit in seconds; 0 = unlimited (never ends, as far as reservations go)."""


@dataclass(frozen=True)
class Running:
    """A running job, its allocation and when it is expected to end."""

    jobid: int
    allocation: Allocation
    expected_end: float


@dataclass(frozen=True)
class Snapshot:
    """The broker's nodes, their free cores and the running jobs at one instant."""

    nodes: Mapping[int, NodeCapacity]
    free: Mapping[int, frozenset[int]]
    running: Sequence[Running]
    now: float


@dataclass(frozen=True)
class Reservation:
    """The blocked head of the queue, with when and where it will start."""

    jobid: int
    start: float
    allocation: Allocation


@dataclass(frozen=True)
class Plan:
    """One scheduling pass: the jobs to start now with their allocations, and the reservation."""

    start: list[tuple[int, Allocation]]
    reservation: Reservation | None = None


@dataclass(frozen=True)
class _Cores:
    """The broker's pool for the shared EASY: per-rank core sets, placed by `allocate`."""

    nodes: Mapping[int, NodeCapacity]

    def place(self, request: ResourceRequest, free: dict[int, frozenset[int]]) -> Allocation | None:
        return allocate(request, free, self.nodes)

    def take(self, free: dict[int, frozenset[int]], placed: Allocation) -> dict[int, frozenset[int]]:
        return free_after(free, placed)

    def give(self, free: dict[int, frozenset[int]], placed: Allocation) -> dict[int, frozenset[int]]:
        return release(free, placed)

    def avoiding(self, free: dict[int, frozenset[int]], reserved: Allocation) -> dict[int, frozenset[int]]:
        return {rank: cores - frozenset(reserved.get(rank, ())) for rank, cores in free.items()}


def plan(queue: Sequence[Waiting], snapshot: Snapshot, policy: QueuePolicy = "fcfs") -> Plan:
    """Which waiting jobs start now, in queue order (the queue is already sorted by priority).

    fcfs: start jobs in order until the first that does not fit.
    easy: the first job that does not fit gets a reservation at the earliest time enough resources free up;
    later jobs start now if they fit and either end before that reservation or leave it placeable.
    The algorithm is `elasticity.policy.scheduling.easy.plan_queue`, the one the simulator replays traces with.
    """
    if policy not in QUEUE_POLICIES:
        raise ValueError(f"unknown queue policy {policy!r} (expected one of {', '.join(QUEUE_POLICIES)})")
    shared = plan_queue(
        [(job.request, job.duration) for job in queue],
        [(run.allocation, run.expected_end) for run in snapshot.running],
        dict(snapshot.free),
        snapshot.now,
        _Cores(snapshot.nodes),
        policy,
    )
    starts = [(queue[index].jobid, placed) for index, placed in shared.starts]
    reservation = None
    if shared.reservation is not None:
        held = shared.reservation
        reservation = Reservation(queue[held.index].jobid, held.start, held.placement)
    return Plan(starts, reservation)
