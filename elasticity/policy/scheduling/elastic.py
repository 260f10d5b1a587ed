"""Priority-based elastic scheduling of malleable jobs, and the three policies it is compared against
(REFERENCE.md section 6; the Charm++-on-Kubernetes paper).

Jobs have [min, max] replicas and a priority (higher runs first). The queue is served strictly in priority
order (then submission order): a job that cannot start waits at the head and lower-priority jobs wait behind it
(no backfilling in these four policies, as in the paper's priority queue).

- elastic: a job starts at ``min(free, max)`` if that is at least its ``min``; otherwise running jobs of strictly
  lower priority are shrunk towards their minimum, lowest priority first, to free enough for its ``min`` -- but
  only jobs whose last rescale (or start) is at least ``rescale_gap`` seconds ago. Nodes still idle after that go
  to jobs in priority order up to their maximum (running jobs again only past the gap). Jobs ending free nodes,
  so "on completion, give freed slots to jobs in priority order" is the same pass.
- moldable: a job starts at ``min(free, max)`` if that is at least its ``min``, then never changes size.
- rigid-min / rigid-max: a job starts at exactly its ``min`` / ``max`` when that many nodes are free.
"""

from __future__ import annotations

from typing import Literal

from elasticity.policy.scheduling.types import Decisions, Resize, RunningJob, Snapshot, Start, WaitingJob

DEFAULT_RESCALE_GAP = 60.0
Mode = Literal["elastic", "moldable", "rigid-min", "rigid-max"]


def _queue(snapshot: Snapshot) -> list[WaitingJob]:
    return sorted(snapshot.waiting, key=lambda job: (-job.priority, job.submit, job.job))


def plan_priority(snapshot: Snapshot, mode: Mode, rescale_gap: float = DEFAULT_RESCALE_GAP) -> Decisions:
    if mode != "elastic":
        return _without_resizes(snapshot, mode)
    now = snapshot.now
    free = snapshot.free
    sizes = {run.job: run.nodes for run in snapshot.running}
    touched: set[int] = set()

    def resizable(run: RunningJob) -> bool:
        return run.job not in touched and now - run.last_resize >= rescale_gap

    starts: dict[int, WaitingJob] = {}
    for job in _queue(snapshot):
        lo = job.size.min
        if free < lo:
            victims = sorted(
                (run for run in snapshot.running if run.priority < job.priority and resizable(run)),
                key=lambda run: (run.priority, -run.last_resize, run.job),
            )
            spare = sum(sizes[run.job] - run.size.min for run in victims)
            if free + spare < lo:
                break
            for run in victims:
                if free >= lo:
                    break
                take = min(sizes[run.job] - run.size.min, lo - free)
                if take > 0:
                    sizes[run.job] -= take
                    free += take
                    touched.add(run.job)
        starts[job.job] = job
        sizes[job.job] = min(free, job.size.max)  # min(free, max); exactly its minimum after a shrink
        free -= sizes[job.job]

    # Idle nodes to jobs in priority order, up to their maximum.
    order: list[tuple[int, float, int, int]] = [
        (-run.priority, run.last_resize, run.job, run.size.max) for run in snapshot.running if resizable(run)
    ]
    order += [(-job.priority, now, job.job, job.size.max) for job in starts.values()]
    for _, _, job_id, top in sorted(order):
        if free <= 0:
            break
        more = min(free, top - sizes[job_id])
        if more > 0:
            sizes[job_id] += more
            free -= more

    resizes = tuple(Resize(run.job, sizes[run.job]) for run in snapshot.running if sizes[run.job] != run.nodes)
    return Decisions(starts=tuple(Start(job, sizes[job]) for job in starts), resizes=resizes)


def _without_resizes(snapshot: Snapshot, mode: Mode) -> Decisions:
    free = snapshot.free
    starts: list[Start] = []
    for job in _queue(snapshot):
        if mode == "moldable":
            nodes = min(free, job.size.max)
            if nodes < job.size.min:
                break
        else:
            nodes = job.size.min if mode == "rigid-min" else job.size.max
            if nodes > free:
                break
        starts.append(Start(job.job, nodes))
        free -= nodes
    return Decisions(starts=tuple(starts))
