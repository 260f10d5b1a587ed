"""Malleable strategies Min, Avg, Pref and KeepPref (REFERENCE.md section 6), on top of EASY.

Each scheduling pass has three steps:

1. start waiting jobs with EASY backfilling (:func:`elasticity.policy.scheduling.easy.plan_queue`, the same
   function as the rigid baseline), every job asking for its preferred size;
2. if idle nodes cannot start the first waiting job, shrink running malleable jobs to free what it needs (its
   minimum if it is malleable, else its size), and start it; repeat for the next waiting job; stop at the first
   one that shrinking cannot start (it keeps its place: no job overtakes it this way);
3. expand running malleable jobs with the nodes still idle, one node at a time, up to their maximum.

Which job gives or takes the next node is its *priority* ``p``: Min ``current - min``, Avg
``(current - min) / (max - min)``, Pref ``current - pref``. A shrink takes from the highest ``p``, an expand
gives to the lowest ``p`` (ties: the earlier job id). KeepPref starts jobs at their preferred size like the
others, but only shrinks jobs that run above their preferred size, and never below it (its ``p`` is Pref's).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping
from typing import Literal

from elasticity.model.speedup import JobSize
from elasticity.policy.scheduling.easy import NODES, plan_queue
from elasticity.policy.scheduling.types import Decisions, Resize, Snapshot, Start, WaitingJob

Strategy = Literal["min", "avg", "pref", "keeppref"]
STRATEGIES: tuple[Strategy, ...] = ("min", "avg", "pref", "keeppref")


def _priority(strategy: Strategy) -> Callable[[int, int, int, int], float]:
    """p(current, min, pref, max)."""
    if strategy == "min":
        return lambda cur, lo, pref, hi: float(cur - lo)
    if strategy == "avg":
        return lambda cur, lo, pref, hi: (cur - lo) / (hi - lo) if hi > lo else 0.0
    return lambda cur, lo, pref, hi: float(cur - pref)


def plan_malleable(snapshot: Snapshot, strategy: Strategy) -> Decisions:
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown malleable strategy {strategy!r} (expected one of {', '.join(STRATEGIES)})")
    p = _priority(strategy)
    waiting = snapshot.waiting
    plan = plan_queue(
        [(job.size.pref, job.estimate) for job in waiting],
        [(run.nodes, run.expected_end) for run in snapshot.running],
        snapshot.free,
        snapshot.now,
        NODES,
        "easy",
    )
    free = snapshot.free - sum(nodes for _, nodes in plan.starts)
    # Current size of every job that may change size in this pass (running or started now), and its range.
    sizes: dict[int, int] = {run.job: run.nodes for run in snapshot.running}
    ranges = {run.job: run.size for run in snapshot.running}
    started: dict[int, int] = {}
    for index, nodes in plan.starts:
        job = waiting[index]
        started[job.job] = nodes
        sizes[job.job] = nodes
        ranges[job.job] = job.size
    floor_of: Callable[[int], int] = (
        (lambda job: ranges[job].pref) if strategy == "keeppref" else (lambda job: ranges[job].min)
    )

    # Step 2: shrink to start waiting jobs, in queue order.
    begun = {waiting[index].job for index, _ in plan.starts}
    for job in waiting:
        if job.job in begun:
            continue
        need = _need(job, strategy)
        if need > free:
            spare = sum(sizes[j] - floor_of(j) for j in sizes if ranges[j].malleable and sizes[j] > floor_of(j))
            if free + spare < need:
                break
            free += _shrink(sizes, ranges, need - free, floor_of, p)
        sizes[job.job] = need
        ranges[job.job] = job.size
        started[job.job] = need
        free -= need

    # Step 3: expand with the nodes still idle.
    if free > 0:
        free -= _expand(sizes, ranges, free, p)

    resizes = tuple(Resize(run.job, sizes[run.job]) for run in snapshot.running if sizes[run.job] != run.nodes)
    starts = tuple(Start(job, sizes[job]) for job in started)
    return Decisions(starts=starts, resizes=resizes, reservation=None)


def _need(job: WaitingJob, strategy: Strategy) -> int:
    return job.size.pref if strategy == "keeppref" else job.size.min


def _shrink(
    sizes: dict[int, int],
    ranges: Mapping[int, JobSize],
    amount: int,
    floor_of: Callable[[int], int],
    p: Callable[[int, int, int, int], float],
) -> int:
    """Take ``amount`` nodes from malleable jobs, one at a time from the highest priority value."""
    heap = [(-_p(p, sizes[j], ranges, j), j) for j in sizes if _malleable(ranges, j) and sizes[j] > floor_of(j)]
    heapq.heapify(heap)
    taken = 0
    while taken < amount and heap:
        _, job = heapq.heappop(heap)
        sizes[job] -= 1
        taken += 1
        if sizes[job] > floor_of(job):
            heapq.heappush(heap, (-_p(p, sizes[job], ranges, job), job))
    return taken


def _expand(
    sizes: dict[int, int],
    ranges: Mapping[int, JobSize],
    amount: int,
    p: Callable[[int, int, int, int], float],
) -> int:
    """Give up to ``amount`` idle nodes to malleable jobs, one at a time to the lowest priority value."""
    heap = [(_p(p, sizes[j], ranges, j), j) for j in sizes if _malleable(ranges, j) and sizes[j] < _hi(ranges, j)]
    heapq.heapify(heap)
    given = 0
    while given < amount and heap:
        _, job = heapq.heappop(heap)
        sizes[job] += 1
        given += 1
        if sizes[job] < _hi(ranges, job):
            heapq.heappush(heap, (_p(p, sizes[job], ranges, job), job))
    return given


def _p(p: Callable[[int, int, int, int], float], current: int, ranges: Mapping[int, JobSize], job: int) -> float:
    size = ranges[job]
    return p(current, size.min, size.pref, size.max)


def _malleable(ranges: Mapping[int, JobSize], job: int) -> bool:
    return ranges[job].malleable


def _hi(ranges: Mapping[int, JobSize], job: int) -> int:
    return ranges[job].max
