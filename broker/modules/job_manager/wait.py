"""Deferred replies and queries: job wait, output watch, annotations, list/info/stats."""

from __future__ import annotations

from typing import Any

from ...bootstrap import compress_hosts
from ...burst_service import pending_note
from ...jobs.info import job_info
from ...jobs.jobspec import JobspecError
from ...jobs.record import JobRecord
from ...jobs.states import ACTIVE, JobState
from ...service import Request
from .core import JobManagerCore, Watch, _slots


class Waits(JobManagerCore):
    def svc_wait(self, req: Request) -> None:
        record = self._record(req)
        if record.state == JobState.INACTIVE:
            req.respond(self._info(record))
        else:
            self.waiters.setdefault(record.jobid, []).append(req)
        return None

    def svc_output(self, req: Request) -> None:
        record = self._record(req)
        offset = req.get("offset", int, required=False, default=0)
        self.out_watch.setdefault(record.jobid, []).append(Watch(req, offset))
        self._notify_output(record.jobid)
        return None

    def _notify_output(self, jobid: int) -> None:
        watches = self.out_watch.get(jobid)
        if not watches:
            return
        record = self.jobs[jobid]
        lines = self._lines(jobid)
        eof = record.state == JobState.INACTIVE
        keep: list[Watch] = []
        for watch in watches:
            if watch.offset < len(lines) or eof or not watch.req.payload.get("wait", False):
                payload: dict[str, Any] = {"lines": lines[watch.offset :], "offset": len(lines), "eof": eof}
                if eof:
                    payload["info"] = self._info(record)
                watch.req.respond(payload)
            else:
                keep.append(watch)
        if keep:
            self.out_watch[jobid] = keep
        else:
            del self.out_watch[jobid]

    def svc_annotate(self, req: Request) -> dict[str, Any]:
        record = self._record(req)
        annotations = req.get("annotations", dict)
        self.post(record, "annotate", annotations)
        return {}

    def svc_annotation_wait(self, req: Request) -> None:
        record = self._record(req)
        key = req.get("key", str)
        if key in record.extra or record.state == JobState.INACTIVE:
            req.respond({"annotations": dict(record.extra), "state": record.state.name})
        else:
            self.annot_watch.setdefault(record.jobid, []).append((req, key))
        return None

    def _notify_annotations(self, jobid: int) -> None:
        record = self.jobs[jobid]
        keep = []
        for req, key in self.annot_watch.pop(jobid, []):
            if key in record.extra:
                req.respond({"annotations": dict(record.extra), "state": record.state.name})
            else:
                keep.append((req, key))
        if keep:
            self.annot_watch[jobid] = keep

    def _info(self, record: JobRecord) -> dict[str, Any]:
        hostnames = self.b.config.hostnames
        nodelist = compress_hosts([hostnames[r] for r in record.ranks if r < len(hostnames)]) if record.ranks else ""
        requested: int | None = None
        try:
            if record.state != JobState.INACTIVE:
                resources = self._spec(record).resources  # parsed once per job, kept (a listing reads all)
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
        note = pending_note(self.b.burst_service_view())
        if note is None or self.sched.unsatisfiable(self._spec(record).resources) is None:
            return None
        return note

    def svc_list(self, req: Request) -> dict[str, Any]:
        mask = req.get("states", int, required=False, default=int(ACTIVE | JobState.INACTIVE))
        count = req.get("max_entries", int, required=False, default=0)
        userid = req.get("userid", int, required=False, default=-1)
        ids = req.get("ids", list, required=False, default=None)
        records = [self.jobs[i] for i in ids if i in self.jobs] if ids is not None else list(self.jobs.values())
        chosen = [r for r in records if r.state & mask and (userid < 0 or r.userid == userid)]
        pending = sorted((r for r in chosen if r.state & ACTIVE and not r.t_run), key=lambda r: (-r.priority, r.jobid))
        running = sorted((r for r in chosen if r.state & ACTIVE and r.t_run), key=lambda r: -r.t_run)
        done = sorted((r for r in chosen if r.state == JobState.INACTIVE), key=lambda r: -r.t_inactive)
        ordered = [*pending, *running, *done]
        if count > 0:
            ordered = ordered[:count]
        return {"jobs": [self._info(r) for r in ordered]}

    def svc_info(self, req: Request) -> dict[str, Any]:
        record = self._record(req)
        info = self._info(record)
        if req.payload.get("jobspec"):
            info["jobspec"] = record.jobspec
        return info

    def svc_stats(self, req: Request) -> dict[str, Any]:
        counts = {str(state.name).lower(): 0 for state in JobState}
        for record in self.jobs.values():
            counts[str(record.state.name).lower()] += 1
        return {"states": counts, "queue_length": len(self.queue), "running": len(self.execs)}
