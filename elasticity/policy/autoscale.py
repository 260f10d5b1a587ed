"""Queue-driven size of one MiniCluster: grow for pending jobs, drain then shrink after an idle period.

The node need comes from the scheduling policy itself (:mod:`elasticity.policy.scheduling`, the functions the
simulator replays traces with): the plan asks it which pending jobs would start if the cluster had ``maxSize``
nodes, and wants the nodes they and the running jobs would use -- and at least the nodes of the first job that
would still wait (it runs next). FCFS: nothing passes the head; EASY: backfilled jobs count too.

Shrinking never kills work: scale-down removes the highest indexes, so the plan first *drains* the ranks that
would go (the scheduler gives them no new jobs), and asks for the smaller size only once those ranks run nothing,
the cluster has had more nodes than it needed for ``idle_seconds``, and the last scale is ``cooldown_seconds``
ago (and the queue reports them drained, so no job was placed there in between). Rank 0 (the lead) is never
drained or removed; sizes stay within [max(1, minSize), maxSize].
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from elasticity.model.size import SizeRange
from elasticity.model.speedup import JobSize
from elasticity.policy.scheduling.easy import easy, fcfs
from elasticity.policy.scheduling.types import RunningJob, Snapshot, WaitingJob

SizingPolicy = Literal["easy", "fcfs"]
SIZING_POLICIES: tuple[SizingPolicy, ...] = ("easy", "fcfs")


@dataclass(frozen=True)
class QueueView:
    """The lead's queue at one instant, in nodes (ranks)."""

    pending: tuple[int, ...] = ()
    """Node need of each pending job, in queue order."""
    running: tuple[tuple[int, ...], ...] = ()
    """The ranks of each running job."""
    draining: frozenset[int] = frozenset()
    """Ranks the scheduler currently gives no new jobs (whoever drained them)."""
    pending_estimates: tuple[float, ...] = ()
    """Requested time of each pending job (seconds; missing or 0 = unlimited)."""
    owned: frozenset[int] = frozenset()
    """The draining ranks an autoscaler drained (its drain reason): the only ones a loop ever undrains."""

    @property
    def busy(self) -> frozenset[int]:
        return frozenset(rank for ranks in self.running for rank in ranks)


@dataclass(frozen=True)
class AutoscaleOptions:
    idle_seconds: float = 60.0
    cooldown_seconds: float = 30.0
    policy: SizingPolicy = "easy"


@dataclass(frozen=True)
class AutoscaleMemory:
    """What the loop carries from one step to the next (the plan itself keeps no state)."""

    last_scale: float = -math.inf
    surplus_since: float | None = None
    """Since when the cluster has had more nodes than it needs (None: it has not)."""


@dataclass(frozen=True)
class ScalePlan:
    size: int | None
    """Scale to this size now (None: keep the size)."""
    drain: frozenset[int]
    """The ranks that should take no new jobs (empty: none)."""
    memory: AutoscaleMemory
    reason: str = ""
    wanted: int = 0
    """The size the queue asks for (before cool-down and idle time)."""
    details: dict[str, int] = field(default_factory=dict)


def wanted_size(queue: QueueView, size: int, sizes: SizeRange, policy: SizingPolicy, now: float) -> int:
    """Nodes the running jobs and the jobs the policy would start at maxSize use, within the size range."""
    running = tuple(
        RunningJob(index, len(ranks), JobSize.rigid(max(1, len(ranks))), math.inf)
        for index, ranks in enumerate(queue.running)
        if ranks
    )
    estimates = queue.pending_estimates
    waiting = tuple(
        WaitingJob(
            len(running) + index,
            now,
            JobSize.rigid(need),
            estimates[index] if index < len(estimates) and estimates[index] > 0 else math.inf,
        )
        for index, need in enumerate(queue.pending)
        if 1 <= need <= sizes.maximum
    )
    used = sum(job.nodes for job in running)
    head = 0
    if waiting:
        decide = easy if policy == "easy" else fcfs
        started = decide(Snapshot(now, sizes.maximum, running, waiting)).starts
        used += sum(start.nodes for start in started)
        begun = {start.job for start in started}
        # The first job that cannot start yet runs next, on as many nodes as it asks: keep (or get) them.
        head = next((job.size.pref for job in waiting if job.job not in begun), 0)
    highest_busy = max(queue.busy, default=0)
    return sizes.clamp(max(used, head, highest_busy + 1, 1))


def plan_autoscale(
    queue: QueueView,
    size: int,
    sizes: SizeRange,
    options: AutoscaleOptions,
    memory: AutoscaleMemory,
    now: float,
) -> ScalePlan:
    wanted = wanted_size(queue, size, sizes, options.policy, now)
    cooled = now - memory.last_scale >= options.cooldown_seconds
    if wanted > size:
        if not cooled:
            return ScalePlan(None, frozenset(), AutoscaleMemory(memory.last_scale, None), "cooling down", wanted)
        return ScalePlan(
            wanted,
            frozenset(),
            AutoscaleMemory(now, None),
            f"{len(queue.pending)} pending jobs need {wanted} nodes",
            wanted,
        )
    if wanted == size:
        return ScalePlan(None, frozenset(), AutoscaleMemory(memory.last_scale, None), "", wanted)
    # More nodes than needed: drain the ranks a shrink would remove, shrink once they are idle long enough.
    since = memory.surplus_since if memory.surplus_since is not None else now
    leaving = frozenset(range(max(wanted, 1), size))
    still_busy = leaving & queue.busy
    kept = AutoscaleMemory(memory.last_scale, since)
    if now - since < options.idle_seconds:
        return ScalePlan(None, frozenset(), kept, f"surplus for {now - since:.0f}s", wanted)
    if still_busy or not cooled or not leaving <= queue.draining:
        # Scale only once the queue itself reports the ranks drained and idle: a job placed between our look at
        # the queue and the drain taking effect would otherwise be cut off.
        why = f"draining ranks {sorted(still_busy or leaving)}" if still_busy or cooled else "cooling down"
        return ScalePlan(None, leaving, kept, why, wanted)
    return ScalePlan(
        wanted,
        leaving,
        AutoscaleMemory(now, None),
        f"idle for {now - since:.0f}s: {size} -> {wanted}",
        wanted,
    )
