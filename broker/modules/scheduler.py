"""Scheduler glue: the broker's membership and the job manager's jobs as a policy Snapshot, and the plan back.

The policies themselves (elasticity/policy/queue.py) are pure and shared with the simulator; this only builds
their input from live state: per-rank cores from the resource reports, up/down from membership, running jobs
with their expected end (start + time limit).
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from common import idset
from elasticity.policy.allocate import NodeCapacity, allocate, never_fits
from elasticity.policy.queue import Plan, Running, Snapshot, Waiting, plan
from elasticity.policy.scheduling.easy import QUEUE_POLICIES, QueuePolicy

from ..jobs.jobspec import ResourceRequest
from ..membership import UP, Membership
from .drains import DrainTable


@functools.lru_cache(maxsize=256)
def core_set(cores: str) -> frozenset[int]:
    """A rank's reported cores ('0-3') as a set, decoded once per distinct report: every scheduling pass and
    every submission's fit check reads every rank's (a pass per job end, issue 45)."""
    return frozenset(idset.decode(cores))


class ClusterView(Protocol):
    """What scheduling reads of the broker: the ranks' states and resource reports, and the instance's size."""

    @property
    def size(self) -> int: ...

    @property
    def membership(self) -> Membership: ...


class Scheduler:
    """Node/core allocation for the job manager with a pluggable queue policy (fcfs, easy)."""

    def __init__(self, broker: ClusterView, policy: str, drains: DrainTable | None = None) -> None:
        if policy not in QUEUE_POLICIES:
            raise ValueError(f"sched.queue-policy: unknown policy {policy!r} (expected {', '.join(QUEUE_POLICIES)})")
        self.b = broker
        self.policy: QueuePolicy = "easy" if policy == "easy" else "fcfs"
        self.drains = drains if drains is not None else DrainTable()
        """Drained ranks and why (kept across a policy change: pass the old scheduler's table)."""

    @property
    def drained(self) -> frozenset[int]:
        """Ranks that take no new jobs (an autoscaler drains them before a scale-down removes them)."""
        return self.drains.ranks

    def nodes(self) -> dict[int, NodeCapacity]:
        out: dict[int, NodeCapacity] = {}
        for info in self.b.membership.ranks:
            report = info.resources or {}
            cores = core_set(str(report["cores"])) if "cores" in report else frozenset()
            out[info.rank] = NodeCapacity(info.rank, cores, up=info.state == UP and bool(cores))
        return out

    def unsatisfiable(self, request: ResourceRequest) -> str | None:
        return never_fits(request, self.nodes(), self.b.size)

    def plan(
        self,
        queue: Iterable[Waiting],
        running: Iterable[tuple[int, Mapping[int, list[int]], float, float]],
        drained: frozenset[int] | None = None,
        nodes: dict[int, NodeCapacity] | None = None,
    ) -> Plan:
        """running: (jobid, allocation, t_run, duration) of every job holding resources; `drained` overrides the
        drained ranks (what would start were none drained); `nodes`: self.nodes() if the caller has just read it."""
        nodes = self.nodes() if nodes is None else nodes
        skip = self.drained if drained is None else drained
        free = {rank: node.cores for rank, node in nodes.items() if node.up and rank not in skip}
        held: list[Running] = []
        for jobid, allocation, t_run, duration in running:
            for rank, cores in allocation.items():
                if rank in free:
                    free[rank] = free[rank] - frozenset(cores)
            end = t_run + duration if duration > 0 else math.inf
            held.append(Running(jobid, {r: list(c) for r, c in allocation.items()}, end))
        snapshot = Snapshot(nodes=nodes, free=free, running=held, now=time.time())
        return plan(list(queue), snapshot, self.policy)

    def held_by_drains(
        self, queue: list[Waiting], running: Sequence[tuple[int, Mapping[int, list[int]], float, float]]
    ) -> set[int]:
        """The jobs of `queue` (none of which start now) that wait because ranks are drained: they would start
        now were no rank drained, or they need more than the undrained ranks have even when idle."""
        if not self.drained or not queue:
            return set()
        would = {jobid for jobid, _ in self.plan(queue, running, drained=frozenset()).start}
        nodes = self.nodes()
        idle_all = {rank: node.cores for rank, node in nodes.items() if node.up}
        idle_undrained = {rank: cores for rank, cores in idle_all.items() if rank not in self.drained}
        for job in queue:
            if job.jobid in would:
                continue
            if allocate(job.request, idle_undrained, nodes) is None and allocate(job.request, idle_all, nodes):
                would.add(job.jobid)
        return would
