"""Queue policies: FCFS and EASY backfilling, as a pure function from a snapshot to the jobs to start."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from elasticity.model.resources import ResourceRequest
from elasticity.policy.allocate import Allocation, NodeCapacity, allocate, free_after, release

QueuePolicy = Literal["fcfs", "easy"]
QUEUE_POLICIES: tuple[QueuePolicy, ...] = ("fcfs", "easy")


@dataclass(frozen=True)
class Waiting:
    jobid: int
    request: ResourceRequest
    duration: float
    """Requested time limit in seconds; 0 = unlimited (never ends, as far as reservations go)."""


@dataclass(frozen=True)
class Running:
    jobid: int
    allocation: Allocation
    expected_end: float


@dataclass(frozen=True)
class Snapshot:
    nodes: Mapping[int, NodeCapacity]
    free: Mapping[int, frozenset[int]]
    running: Sequence[Running]
    now: float


@dataclass(frozen=True)
class Reservation:
    jobid: int
    start: float
    allocation: Allocation


@dataclass(frozen=True)
class Plan:
    start: list[tuple[int, Allocation]]
    reservation: Reservation | None = None


def _reserve(job: Waiting, snapshot: Snapshot, started: list[Running]) -> Reservation | None:
    """Earliest time the job fits if running jobs end when their time limits say, and where."""
    free = dict(snapshot.free)
    ending = sorted([*snapshot.running, *started], key=lambda r: r.expected_end)
    for run in ending:
        if math.isinf(run.expected_end):
            break
        free = release(free, run.allocation)
        placed = allocate(job.request, free, snapshot.nodes)
        if placed is not None:
            return Reservation(job.jobid, run.expected_end, placed)
    return None


def plan(queue: Sequence[Waiting], snapshot: Snapshot, policy: QueuePolicy = "fcfs") -> Plan:
    """Which waiting jobs start now, in queue order (the queue is already sorted by priority).

    fcfs: start jobs in order until the first that does not fit.
    easy: the first job that does not fit gets a reservation at the earliest time enough resources free up;
    later jobs start now if they fit and either end before that reservation or avoid the resources it needs.
    """
    if policy not in QUEUE_POLICIES:
        raise ValueError(f"unknown queue policy {policy!r} (expected one of {', '.join(QUEUE_POLICIES)})")
    free = dict(snapshot.free)
    starts: list[tuple[int, Allocation]] = []
    started: list[Running] = []
    reservation: Reservation | None = None
    blocked = False
    for job in queue:
        if not blocked:
            placed = allocate(job.request, free, snapshot.nodes)
            if placed is not None:
                free = free_after(free, placed)
                starts.append((job.jobid, placed))
                end = snapshot.now + job.duration if job.duration > 0 else math.inf
                started.append(Running(job.jobid, placed, end))
                continue
            if policy == "fcfs":
                break
            blocked = True
            reservation = _reserve(job, snapshot, started)
            continue
        # Backfill candidates behind the blocked head (EASY only).
        placed = allocate(job.request, free, snapshot.nodes)
        if placed is None:
            continue
        ends = snapshot.now + job.duration if job.duration > 0 else math.inf
        if reservation is not None and ends > reservation.start:
            # Still running when the head job is due: it may only use cores the reservation does not need.
            placed = allocate(job.request, _without(free, reservation.allocation), snapshot.nodes)
            if placed is None:
                continue
        free = free_after(free, placed)
        starts.append((job.jobid, placed))
    return Plan(starts, reservation)


def _without(free: Mapping[int, frozenset[int]], reserved: Allocation) -> dict[int, frozenset[int]]:
    return {rank: cores - frozenset(reserved.get(rank, ())) for rank, cores in free.items()}
