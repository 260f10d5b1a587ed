"""Scheduler glue: the broker's membership and the job manager's jobs as a policy Snapshot, and the plan back.

The policies themselves (elasticity/policy/queue.py) are pure and shared with the simulator; this only builds
their input from live state: per-rank cores from the resource reports, up/down from membership, running jobs
with their expected end (start + time limit).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from elasticity.policy.allocate import NodeCapacity, never_fits
from elasticity.policy.queue import QUEUE_POLICIES, Plan, QueuePolicy, Running, Snapshot, Waiting, plan

from .. import idset
from ..jobs.jobspec import ResourceRequest
from ..membership import UP

if TYPE_CHECKING:
    from ..broker import Broker


class Scheduler:
    """Node/core allocation for the job manager with a pluggable queue policy (fcfs, easy)."""

    def __init__(self, broker: Broker, policy: str) -> None:
        if policy not in QUEUE_POLICIES:
            raise ValueError(f"sched.queue-policy: unknown policy {policy!r} (expected {', '.join(QUEUE_POLICIES)})")
        self.b = broker
        self.policy: QueuePolicy = "easy" if policy == "easy" else "fcfs"
        self.drained: frozenset[int] = frozenset()
        """Ranks that take no new jobs (an autoscaler drains them before a scale-down removes them)."""

    def nodes(self) -> dict[int, NodeCapacity]:
        out: dict[int, NodeCapacity] = {}
        for info in self.b.membership.ranks:
            report = info.resources or {}
            cores = frozenset(idset.decode(str(report["cores"]))) if "cores" in report else frozenset()
            out[info.rank] = NodeCapacity(info.rank, cores, up=info.state == UP and bool(cores))
        return out

    def unsatisfiable(self, request: ResourceRequest) -> str | None:
        return never_fits(request, self.nodes(), self.b.size)

    def plan(
        self, queue: Iterable[Waiting], running: Iterable[tuple[int, Mapping[int, list[int]], float, float]]
    ) -> Plan:
        """running: (jobid, allocation, t_run, duration) of every job holding resources."""
        nodes = self.nodes()
        free = {rank: node.cores for rank, node in nodes.items() if node.up and rank not in self.drained}
        held: list[Running] = []
        for jobid, allocation, t_run, duration in running:
            for rank, cores in allocation.items():
                if rank in free:
                    free[rank] = free[rank] - frozenset(cores)
            end = t_run + duration if duration > 0 else math.inf
            held.append(Running(jobid, {r: list(c) for r, c in allocation.items()}, end))
        snapshot = Snapshot(nodes=nodes, free=free, running=held, now=time.time())
        return plan(list(queue), snapshot, self.policy)
