"""The lead's queue in ranks for autoscalers (`job-manager.queue-state`) and draining ranks (`job-manager.drain`).

A drained rank takes no new jobs; the jobs running on it finish normally. Each drain keeps its reason and time
(`broker/modules/drains.py`), so `flux resource drain` lists them as flux-core does and a controller undrains only
the ranks it drained itself. The lead (rank 0) cannot be drained: it is never removed by scaling.
"""

from __future__ import annotations

import math
import time
from errno import EINVAL
from typing import TYPE_CHECKING, Any, cast

from ..service import Request, ServiceError
from .drains import DRAIN_MODES, DrainError, DrainMode

if TYPE_CHECKING:
    from .job_manager import JobManager


def node_need(nnodes: int | None, total_cores: int, cores_per_node: int) -> int:
    """Nodes a job needs: its node count, else its cores over the largest node's cores (at least 1)."""
    if nnodes:
        return nnodes
    return max(1, math.ceil(total_cores / max(1, cores_per_node)))


def register(jm: JobManager) -> None:
    table, queue, executions, broker = jm.table, jm.queue, jm.executions, jm.broker

    def queue_state(req: Request) -> dict[str, Any]:
        nodes = queue.sched.nodes()
        per_node = max((len(n.cores) for n in nodes.values()), default=1)
        pending = []
        for jobid in sorted(queue.pending(), key=lambda j: (-table[j].priority, j)):
            spec = table.spec(table[jobid])
            need = node_need(spec.resources.nnodes, spec.resources.total_cores, per_node)
            pending.append({"id": jobid, "nnodes": need, "duration": spec.duration})
        running = [
            {
                "id": jobid,
                "ranks": sorted(table[jobid].ranks),
                "cores": {str(rank): len(cores) for rank, cores in table[jobid].cores.items()},
            }
            for jobid in executions.running()
        ]
        return {
            "pending": pending,
            "running": running,
            "drained": sorted(queue.sched.drained),
            "drain": queue.sched.drains.as_json(),
        }

    def drain(req: Request) -> dict[str, Any]:
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
        bad = [r for r in ranks if not 0 <= r < broker.size]
        if bad:
            raise ServiceError(EINVAL, f"no such rank {bad[0]} (instance size {broker.size})")
        try:
            queue.sched.drains.apply(cast(DrainMode, mode), ranks, reason, time.time())
        except DrainError as exc:
            raise ServiceError(EINVAL, f"{exc}") from None
        queue.kick()
        busy = sorted({r for jobid in executions.running() for r in table[jobid].ranks} & set(ranks))
        return {"drained": sorted(queue.sched.drained), "busy": busy}

    broker.register("job-manager.queue-state", queue_state)
    broker.register("job-manager.drain", drain)
