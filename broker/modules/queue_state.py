"""The lead's queue in ranks for autoscalers (`job-manager.queue-state`) and draining ranks (`job-manager.drain`).

A drained rank takes no new jobs; the jobs running on it finish normally. Each drain keeps its reason and time
(`broker/modules/drains.py`), so `flux resource drain` lists them as flux-core does and a controller undrains only
the ranks it drained itself. The lead (rank 0) cannot be drained: it is never removed by scaling.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from errno import EINVAL
from typing import Any, Protocol, cast

from ..service import Request, ServiceError
from .drains import DRAIN_MODES, DrainError, DrainMode
from .scheduler import Scheduler


class JobManager(Protocol):
    """What these services read of the job manager (a Protocol: the job manager imports this module)."""

    @property
    def sched(self) -> Scheduler: ...

    @property
    def queue(self) -> set[int]: ...

    @property
    def jobs(self) -> Mapping[int, Any]: ...

    @property
    def execs(self) -> Mapping[int, Any]: ...

    @property
    def b(self) -> Any: ...

    def kick_sched(self) -> None: ...

    def _spec(self, record: Any) -> Any: ...


def node_need(nnodes: int | None, total_cores: int, cores_per_node: int) -> int:
    """Nodes a job needs: its node count, else its cores over the largest node's cores (at least 1)."""
    if nnodes:
        return nnodes
    return max(1, math.ceil(total_cores / max(1, cores_per_node)))


def register(jm: JobManager) -> None:
    def queue_state(req: Request) -> dict[str, Any]:
        nodes = jm.sched.nodes()
        per_node = max((len(n.cores) for n in nodes.values()), default=1)
        pending = []
        for jobid in sorted(jm.queue, key=lambda j: (-jm.jobs[j].priority, j)):
            spec = jm._spec(jm.jobs[jobid])
            need = node_need(spec.resources.nnodes, spec.resources.total_cores, per_node)
            pending.append({"id": jobid, "nnodes": need, "duration": spec.duration})
        running = [
            {
                "id": jobid,
                "ranks": sorted(jm.jobs[jobid].ranks),
                "cores": {str(rank): len(cores) for rank, cores in jm.jobs[jobid].cores.items()},
            }
            for jobid in jm.execs
        ]
        return {
            "pending": pending,
            "running": running,
            "drained": sorted(jm.sched.drained),
            "drain": jm.sched.drains.as_json(),
        }

    def drain(req: Request) -> dict[str, Any]:
        """Drain or undrain ranks: `ranks`, `reason` (free text) and `mode` (DrainTable.apply; default "exact")."""
        ranks = req.get("ranks", list)
        reason = req.get("reason", str, required=False, default="")
        mode = req.get("mode", str, required=False, default="exact")
        if mode not in DRAIN_MODES:
            raise ServiceError(EINVAL, f"job-manager.drain: unknown mode {mode!r} (expected {', '.join(DRAIN_MODES)})")
        if not all(isinstance(r, int) and not isinstance(r, bool) for r in ranks):
            raise ServiceError(EINVAL, "job-manager.drain: 'ranks' must be a list of integers")
        if 0 in ranks and mode != "undrain":
            raise ServiceError(EINVAL, "job-manager.drain: rank 0 (the lead) is never drained")
        bad = [r for r in ranks if not 0 <= r < jm.b.size]
        if bad:
            raise ServiceError(EINVAL, f"job-manager.drain: no such rank {bad[0]} (instance size {jm.b.size})")
        try:
            jm.sched.drains.apply(cast(DrainMode, mode), ranks, reason, time.time())
        except DrainError as exc:
            raise ServiceError(EINVAL, f"job-manager.drain: {exc}") from None
        jm.kick_sched()
        busy = sorted({r for jobid in jm.execs for r in jm.jobs[jobid].ranks} & set(ranks))
        return {"drained": sorted(jm.sched.drained), "busy": busy}

    jm.b.register("job-manager.queue-state", queue_state)
    jm.b.register("job-manager.drain", drain)
