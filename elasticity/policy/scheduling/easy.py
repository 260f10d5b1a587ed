"""FCFS and EASY backfilling, written once over any resource pool (whole nodes here, cores in the broker).

EASY: jobs start in queue order while they fit. The first job that does not fit gets a reservation at the
earliest time enough resources free up, assuming running jobs end when their requested times say. A later
job may start now if it fits now and either ends (by its requested time) no later than the reservation, or
leaves the reservation still placeable at its time (it only uses resources the reservation does not need).
FCFS stops at the first job that does not fit.

The pool says what "fits" means: :class:`NodeCount` counts whole nodes (the simulator); the broker passes a
pool over per-rank core sets. The algorithm is the same function for both.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, Literal, Protocol, TypeVar

from elasticity.policy.scheduling.types import Decisions, Reserve, Snapshot, Start

Req = TypeVar("Req", contravariant=True)
Free = TypeVar("Free")
Place = TypeVar("Place")
QueuePolicy = Literal["fcfs", "easy"]
QUEUE_POLICIES: tuple[QueuePolicy, ...] = ("fcfs", "easy")


class Pool(Protocol[Req, Free, Place]):
    def place(self, request: Req, free: Free) -> Place | None:
        """Where the request would go in ``free``, or None if it does not fit."""

    def take(self, free: Free, placed: Place) -> Free: ...

    def give(self, free: Free, placed: Place) -> Free: ...

    def avoiding(self, free: Free, reserved: Place) -> Free:
        """``free`` without what a reservation holds (pools without identities return ``free``)."""


@dataclass(frozen=True, slots=True)
class Reservation(Generic[Place]):
    """The blocked head of the queue and where and when it will start."""

    index: int
    """Position of the reserved job in the queue."""
    start: float
    placement: Place


@dataclass(frozen=True, slots=True)
class QueuePlan(Generic[Place]):
    """One EASY pass: the jobs to start now and the head's reservation."""

    starts: list[tuple[int, Place]]
    """(queue position, placement) of each job to start now, in queue order."""
    reservation: Reservation[Place] | None


def _end(now: float, duration: float) -> float:
    return now + duration if 0 < duration < math.inf else math.inf


def _reserve(
    index: int,
    request: Req,
    free: Free,
    running: Sequence[tuple[Place, float]],
    pool: Pool[Req, Free, Place],
) -> tuple[Reservation[Place], Free] | None:
    """Earliest time the job fits as running jobs end by their requested times; also the free pool then."""
    for placed, end in sorted(running, key=lambda run: run[1]):
        if math.isinf(end):
            return None
        free = pool.give(free, placed)
        where = pool.place(request, free)
        if where is not None:
            return Reservation(index, end, where), free
    return None


def plan_queue(
    queue: Sequence[tuple[Req, float]],
    running: Sequence[tuple[Place, float]],
    free: Free,
    now: float,
    pool: Pool[Req, Free, Place],
    policy: QueuePolicy = "easy",
) -> QueuePlan[Place]:
    """Which queued jobs start now. ``queue``: (request, requested duration; <= 0 or inf = unlimited) in
    priority order; ``running``: (placement, expected end)."""
    if policy not in QUEUE_POLICIES:
        raise ValueError(f"unknown queue policy {policy!r} (expected one of {', '.join(QUEUE_POLICIES)})")
    starts: list[tuple[int, Place]] = []
    holding = list(running)
    reservation: Reservation[Place] | None = None
    free_then: Free | None = None
    head: Req | None = None
    blocked = False
    for index, (request, duration) in enumerate(queue):
        end = _end(now, duration)
        placed = pool.place(request, free)
        if not blocked:
            if placed is not None:
                free = pool.take(free, placed)
                starts.append((index, placed))
                holding.append((placed, end))
                continue
            if policy == "fcfs":
                break
            blocked = True
            reserved = _reserve(index, request, free, holding, pool)
            if reserved is not None:
                reservation, free_then = reserved
                head = request
            continue
        if placed is None:
            continue
        if reservation is not None and free_then is not None and end > reservation.start:
            placed = _beside(request, placed, free, free_then, head, reservation, pool)
            if placed is None:
                continue
            free_then = pool.take(free_then, placed)
        free = pool.take(free, placed)
        starts.append((index, placed))
    return QueuePlan(starts, reservation)


def _beside(
    request: Req,
    placed: Place,
    free: Free,
    free_then: Free,
    head: Req | None,
    reservation: Reservation[Place],
    pool: Pool[Req, Free, Place],
) -> Place | None:
    """A placement for a job still running at the reservation that leaves the reservation placeable."""
    if head is None:
        return placed
    if pool.place(head, pool.take(free_then, placed)) is not None:
        return placed
    other = pool.place(request, pool.avoiding(free, reservation.placement))
    if other is not None and pool.place(head, pool.take(free_then, other)) is not None:
        return other
    return None


class NodeCount:
    """Whole nodes counted, not named: a request and a placement are node counts, ``free`` is a count."""

    def place(self, request: int, free: int) -> int | None:
        return request if request <= free else None

    def take(self, free: int, placed: int) -> int:
        return free - placed

    def give(self, free: int, placed: int) -> int:
        return free + placed

    def avoiding(self, free: int, reserved: int) -> int:
        return free


NODES = NodeCount()


def rigid(snapshot: Snapshot, policy: QueuePolicy = "easy") -> Decisions:
    """FCFS or EASY over whole nodes; malleable jobs are treated as rigid at their preferred size."""
    waiting = snapshot.waiting
    plan = plan_queue(
        [(job.size.pref, job.estimate) for job in waiting],
        [(run.nodes, run.expected_end) for run in snapshot.running],
        snapshot.free,
        snapshot.now,
        NODES,
        policy,
    )
    starts = tuple(Start(waiting[index].job, nodes) for index, nodes in plan.starts)
    reservation = None
    if plan.reservation is not None:
        held = plan.reservation
        reservation = Reserve(waiting[held.index].job, held.start, waiting[held.index].size.pref)
    return Decisions(starts=starts, reservation=reservation)


def easy(snapshot: Snapshot) -> Decisions:
    return rigid(snapshot, "easy")


def fcfs(snapshot: Snapshot) -> Decisions:
    return rigid(snapshot, "fcfs")
