"""Queries: what `flux jobs`, `flux job info` and the REST API read (list, info, stats), and annotations.
Holds no state of its own: it reads the job table, the queue and the executions."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...bootstrap import compress_hosts
from ...burst_service import pending_note
from ...jobs.info import job_info
from ...jobs.jobspec import JobspecError
from ...jobs.record import JobRecord
from ...jobs.states import ACTIVE, JobState
from ...jsontext import dumps
from ...service import Request

if TYPE_CHECKING:
    from ...broker import Broker
    from . import JobManager


class Queries:
    def __init__(self, jm: JobManager, broker: Broker) -> None:
        self._jm = jm
        self._b = broker

    def info(self, record: JobRecord) -> dict[str, Any]:
        hostnames = self._b.config.hostnames
        nodelist = compress_hosts([hostnames[r] for r in record.ranks if r < len(hostnames)]) if record.ranks else ""
        requested: int | None = None
        try:
            if record.state != JobState.INACTIVE:
                resources = self._jm.table.spec(record).resources  # parsed once per job, kept (a listing reads all)
                ntasks, requested = resources.ntasks, (resources.nnodes or 0)
            else:
                ntasks = -1
        except JobspecError:
            ntasks = 1
        if ntasks < 0:
            tasks = record.jobspec.get("tasks", [{}])[0].get("count", {})
            first = record.jobspec.get("resources", [{}])[0]
            ntasks = int(tasks.get("total", 0)) or _slots(first)
        info = job_info(record, nodelist, ntasks, requested_nodes=requested)
        note = self._burst_note(record)
        if note is not None:  # shown instead of the last reason a service (now gone) gave; never journaled
            info["annotations"]["sched"] = {**(info["annotations"].get("sched") or {}), "reason_pending": note}
        return info

    def _burst_note(self, record: JobRecord) -> str | None:
        """Why a burstable job too big for the instance waits when no burst service is running to say more."""
        if record.state != JobState.SCHED or not record.jobspec.get("attributes", {}).get("system", {}).get(
            "burstable"
        ):
            return None
        note = pending_note(self._b.bursts.service_view())
        if note is None or self._jm.queue.sched.unsatisfiable(self._jm.table.spec(record).resources) is None:
            return None
        return note

    def svc_list(self, req: Request) -> None:
        """Jobs newest first within pending (by priority), running, then inactive; answered as JSON assembled
        from each job's encoded view (kept between listings: issue 27's listing of 5,000 jobs)."""
        table = self._jm.table
        mask = req.get("states", int, required=False, default=int(ACTIVE | JobState.INACTIVE))
        count = req.get("max_entries", int, required=False, default=0)
        userid = req.get("userid", int, required=False, default=-1)
        ids = req.get("ids", list, required=False, default=None)
        records = [table[i] for i in ids if i in table] if ids is not None else list(table.records())
        active, inactive = int(ACTIVE), int(JobState.INACTIVE)
        pending: list[JobRecord] = []
        running: list[JobRecord] = []
        done: list[JobRecord] = []
        for r in records:
            state = r.state.value
            if not state & mask or (userid >= 0 and r.userid != userid):
                continue
            if state & active:
                (running if r.t_run else pending).append(r)
            elif state == inactive:
                done.append(r)
        pending.sort(key=lambda r: (-r.priority, r.jobid))
        running.sort(key=lambda r: -r.t_run)
        done.sort(key=lambda r: -r.t_inactive)
        ordered = [*pending, *running, *done]
        if count > 0:
            ordered = ordered[:count]
        views = [table.encoded_view(r, self._encoded, keep=self._changes_only_with_events(r)) for r in ordered]
        req.respond_encoded('{"jobs":[' + ",".join(views) + "]}")

    def _encoded(self, record: JobRecord) -> str:
        return dumps(self.info(record))

    def _changes_only_with_events(self, record: JobRecord) -> bool:
        """Whether the job's view changes only with its events: not a running job's (its runtime grows) nor a
        pending burstable job's while a note says why it waits (the burst service's view changes it)."""
        return record.state != JobState.RUN and self._burst_note(record) is None

    def svc_info(self, req: Request) -> dict[str, Any]:
        record = self._jm.table.record(req)
        info = self.info(record)
        if req.payload.get("jobspec"):
            info["jobspec"] = record.jobspec
        return info

    def svc_stats(self, req: Request) -> dict[str, Any]:
        counts = {str(state.name).lower(): 0 for state in JobState}
        for record in self._jm.table.records():
            counts[str(record.state.name).lower()] += 1
        return {
            "states": counts,
            "queue_length": len(self._jm.queue.pending()),
            "running": self._jm.executions.count(),
        }

    def svc_annotate(self, req: Request) -> dict[str, Any]:
        record = self._jm.table.record(req)
        self._jm.table.post(record, "annotate", req.get("annotations", dict))
        return {}


def _slots(resource: dict[str, Any]) -> int:
    count = resource.get("count", 1)
    count = count if isinstance(count, int) else 1
    if resource.get("type") == "node":
        inner = resource.get("with", [{}])[0]
        return count * _slots(inner)
    return count
