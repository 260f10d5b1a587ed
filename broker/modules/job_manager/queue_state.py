"""The lead's queue in ranks for autoscalers (`job-manager.queue-state`) and draining ranks (`job-manager.drain`).

A drained rank takes no new jobs; the jobs running on it finish normally. Each drain keeps its reason and time
(`broker/modules/drains.py`), so `flux resource drain` lists them as flux-core does and a controller undrains only
the ranks it drained itself. The lead (rank 0) cannot be drained: it is never removed by scaling. Holds no state:
the drains are the queue's (JobQueue.drain changes them), the jobs the table's and the executions'.
"""

from __future__ import annotations

import math
from errno import EINVAL
from typing import TypedDict, cast

from ...payloads import PendingJob, QueueState, RunningJob
from ...port import BrokerPort
from ...service import Request, ServiceError
from ..drains import DRAIN_MODES, DrainMode
from .queue import JobQueue
from .roles import ExecutionsRole
from .table import JobTable


class DrainReply(TypedDict):
    drained: list[int]
    busy: list[int]


def node_need(nnodes: int | None, total_cores: int, cores_per_node: int) -> int:
    """Nodes a job needs: its node count, else its cores over the largest node's cores (at least 1)."""
    if nnodes:
        return nnodes
    return max(1, math.ceil(total_cores / max(1, cores_per_node)))


class QueueStateService:
    """Serves job-manager.queue-state and job-manager.drain from the parts it is given (no state of its own)."""

    def __init__(self, port: BrokerPort, table: JobTable, queue: JobQueue, executions: ExecutionsRole) -> None:
        self._port = port
        self._table = table
        self._queue = queue
        self._executions = executions
        port.register("job-manager.queue-state", self.svc_queue_state)
        port.register("job-manager.drain", self.svc_drain)

    def svc_queue_state(self, req: Request) -> QueueState:
        table, sched = self._table, self._queue.sched
        nodes = sched.nodes()
        per_node = max((len(n.cores) for n in nodes.values()), default=1)
        pending: list[PendingJob] = []
        for jobid in sorted(self._queue.pending(), key=lambda j: (-table[j].priority, j)):
            spec = table.spec(table[jobid])
            need = node_need(spec.resources.nnodes, spec.resources.total_cores, per_node)
            pending.append({"id": jobid, "nnodes": need, "duration": spec.duration})
        running: list[RunningJob] = [
            {
                "id": jobid,
                "ranks": sorted(table[jobid].ranks),
                "cores": {str(rank): len(cores) for rank, cores in table[jobid].cores.items()},
            }
            for jobid in self._executions.running()
        ]
        return {
            "pending": pending,
            "running": running,
            "drained": sorted(sched.drained),
            "drain": sched.drains.as_json(),
        }

    def svc_drain(self, req: Request) -> DrainReply:
        """Drain or undrain ranks: `ranks`, `reason` (free text) and `mode` (DrainTable.apply; default "exact")."""
        ranks = req.get("ranks", list)
        reason = req.get("reason", str, required=False, default="")
        mode = req.get("mode", str, required=False, default="exact")
        if mode not in DRAIN_MODES:
            raise ServiceError(EINVAL, f"unknown mode {mode!r} (expected {', '.join(DRAIN_MODES)})")
        if not all(isinstance(r, int) and not isinstance(r, bool) for r in ranks):
            raise ServiceError(EINVAL, "'ranks' must be a list of integers")
        if 0 in ranks and mode != "undrain":
            raise ServiceError(EINVAL, "rank 0 (the lead) is never drained")
        bad = [r for r in ranks if not 0 <= r < self._port.size]
        if bad:
            raise ServiceError(EINVAL, f"no such rank {bad[0]} (instance size {self._port.size})")
        drained = self._queue.drain(cast(DrainMode, mode), ranks, reason)
        busy = sorted({r for jobid in self._executions.running() for r in self._table[jobid].ranks} & set(ranks))
        return {"drained": sorted(drained), "busy": busy}
