"""A lead broker's queue on a virtual clock: jobs of N nodes run on ranks of a cluster that may scale.

It implements the autoscaler's QueuePort for tests and dry runs. Jobs start with the shared EASY
(:func:`elasticity.policy.scheduling.easy.plan_queue`) over the ranks that are up and not drained; a job whose
rank disappears (a scale-down that did not drain) is requeued and counted, never dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from elasticity.control.ports import Observer
from elasticity.policy.autoscale import QueueView
from elasticity.policy.scheduling.easy import plan_queue


class RankSet:
    """EASY's pool over named ranks: the lowest free ranks first."""

    def place(self, request: int, free: frozenset[int]) -> frozenset[int] | None:
        if request > len(free):
            return None
        return frozenset(sorted(free)[:request])

    def take(self, free: frozenset[int], placed: frozenset[int]) -> frozenset[int]:
        return free - placed

    def give(self, free: frozenset[int], placed: frozenset[int]) -> frozenset[int]:
        return free | placed

    def avoiding(self, free: frozenset[int], reserved: frozenset[int]) -> frozenset[int]:
        return free - reserved


@dataclass
class QueuedJob:
    id: int
    nodes: int
    duration: float
    submit: float
    start: float | None = None
    end: float | None = None
    ranks: frozenset[int] = frozenset()
    requeues: int = 0


@dataclass
class SimulatedQueue:
    observer: Observer
    name: str
    jobs: dict[int, QueuedJob] = field(default_factory=dict)
    drained: frozenset[int] = frozenset()
    """Ranks the autoscaler drained."""
    foreign: frozenset[int] = frozenset()
    """Ranks drained by someone else (an operator): the autoscaler's drains never touch them."""
    now: float = 0.0

    def submit(self, job_id: int, nodes: int, duration: float) -> None:
        if job_id in self.jobs:
            raise ValueError(f"job {job_id} already submitted")
        self.jobs[job_id] = QueuedJob(job_id, nodes, duration, self.now)

    def advance(self, now: float) -> None:
        """Finish jobs due by ``now``, requeue jobs that lost a rank, start what the policy starts."""
        self.now = now
        size = self.observer.observe(self.name).size
        for job in self.jobs.values():
            if job.start is not None and job.end is None:
                if max(job.ranks) >= size:
                    job.start, job.ranks, job.requeues = None, frozenset(), job.requeues + 1
                elif job.start + job.duration <= now:
                    job.end = job.start + job.duration
        pending = sorted((j for j in self.jobs.values() if j.start is None), key=lambda j: (j.submit, j.id))
        running = [j for j in self.jobs.values() if j.start is not None and j.end is None]
        busy = frozenset(r for j in running for r in j.ranks)
        free = frozenset(range(size)) - busy - self.drained - self.foreign
        plan = plan_queue(
            [(j.nodes, j.duration) for j in pending],
            [(j.ranks, (j.start or 0.0) + j.duration) for j in running],
            free,
            now,
            RankSet(),
            "easy",
        )
        for index, ranks in plan.starts:
            pending[index].start, pending[index].ranks = now, ranks

    def queue(self, name: str) -> QueueView:
        pending = sorted((j for j in self.jobs.values() if j.start is None), key=lambda j: (j.submit, j.id))
        running = [j for j in self.jobs.values() if j.start is not None and j.end is None]
        return QueueView(
            pending=tuple(j.nodes for j in pending),
            running=tuple(tuple(sorted(j.ranks)) for j in running),
            draining=self.drained | self.foreign,
            pending_estimates=tuple(j.duration for j in pending),
            owned=self.drained,
        )

    def drain(self, name: str, ranks: frozenset[int]) -> None:
        """The autoscaler's drains become exactly `ranks` (ranks someone else drained keep their drain)."""
        self.drained = frozenset(ranks) - self.foreign

    @property
    def finished(self) -> int:
        return sum(1 for j in self.jobs.values() if j.end is not None)
