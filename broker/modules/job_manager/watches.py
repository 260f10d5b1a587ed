"""Watches: deferred replies answered when a job reaches the point asked for (job wait, output and eventlog
watches, annotation waits, queue-idle waits), so clients never poll."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...jobs.record import JobRecord
from ...jobs.states import JobState
from ...service import Request

if TYPE_CHECKING:
    from ...broker import Broker
    from . import JobManager


@dataclass(frozen=True)
class Watch:
    req: Request
    offset: int


class Watches:
    """Every request waiting on a job or on the queue."""

    def __init__(self, jm: JobManager, broker: Broker) -> None:
        self._jm = jm
        self._b = broker
        self._waiters: dict[int, list[Request]] = {}
        self._output_watches: dict[int, list[Watch]] = {}
        self._eventlog_watches: dict[int, list[Watch]] = {}
        self._annotation_waits: dict[int, list[tuple[Request, str]]] = {}
        self._idle_waits: list[tuple[Request, str]] = []

    # ------------------------------------------------------------------ services
    def svc_wait(self, req: Request) -> None:
        record = self._jm.table.record(req)
        if record.state == JobState.INACTIVE:
            req.respond(self._jm.queries.info(record))
        else:
            self._waiters.setdefault(record.jobid, []).append(req)
        return None

    def svc_output(self, req: Request) -> None:
        record = self._jm.table.record(req)
        offset = req.get("offset", int, required=False, default=0)
        self._output_watches.setdefault(record.jobid, []).append(Watch(req, offset))
        self.notify_output(record.jobid)
        return None

    def svc_eventlog(self, req: Request) -> None:
        record = self._jm.table.record(req)
        offset = req.get("offset", int, required=False, default=0)
        self._eventlog_watches.setdefault(record.jobid, []).append(Watch(req, offset))
        self._notify_eventlog(record.jobid)
        return None

    def svc_annotation_wait(self, req: Request) -> None:
        record = self._jm.table.record(req)
        key = req.get("key", str)
        if key in record.extra or record.state == JobState.INACTIVE:
            req.respond({"annotations": dict(record.extra), "state": record.state.name})
        else:
            self._annotation_waits.setdefault(record.jobid, []).append((req, key))
        return None

    def svc_queue_idle(self, req: Request) -> None:
        mode = req.get("mode", str, required=False, default="idle")
        self._idle_waits.append((req, mode))
        self.check_idle()
        return None

    # ------------------------------------------------------------------ what other parts tell
    def committed(self, touched: set[int]) -> None:
        """Events of these jobs are on disk: eventlog and annotation watchers may be answered."""
        for jobid in touched:
            self._notify_eventlog(jobid)
        for jobid in touched & set(self._annotation_waits):
            self._notify_annotations(jobid)

    def job_ended(self, record: JobRecord) -> None:
        """The job is inactive: whoever waits for it is answered."""
        waiters = self._waiters.pop(record.jobid, [])
        if waiters:
            info = self._jm.queries.info(record)
            for req in waiters:
                req.respond(info)

    def annotations_ended(self, record: JobRecord) -> None:
        """The job is inactive: its annotations will not change any more."""
        for req, _key in self._annotation_waits.pop(record.jobid, []):
            req.respond({"annotations": dict(record.extra), "state": record.state.name})

    def notify_output(self, jobid: int) -> None:
        watches = self._output_watches.get(jobid)
        if not watches:
            return
        record = self._jm.table[jobid]
        lines = self._jm.executions.lines(jobid)
        eof = record.state == JobState.INACTIVE
        keep: list[Watch] = []
        for watch in watches:
            if watch.offset < len(lines) or eof or not watch.req.payload.get("wait", False):
                payload: dict[str, Any] = {"lines": lines[watch.offset :], "offset": len(lines), "eof": eof}
                if eof:
                    payload["info"] = self._jm.queries.info(record)
                watch.req.respond(payload)
            else:
                keep.append(watch)
        if keep:
            self._output_watches[jobid] = keep
        else:
            del self._output_watches[jobid]

    def check_idle(self) -> None:
        if not self._idle_waits:
            return
        active = self._jm.table.active_count
        running = self._jm.executions.count()
        keep = []
        for req, mode in self._idle_waits:
            done = not running if mode == "idle" else active == 0
            if done:
                req.respond({"pending": len(self._jm.queue.pending()), "running": running})
            else:
                keep.append((req, mode))
        self._idle_waits = keep

    # ------------------------------------------------------------------ answering
    def _notify_eventlog(self, jobid: int) -> None:
        watches = self._eventlog_watches.get(jobid)
        if not watches:
            return
        table = self._jm.table
        events = table.eventlog(jobid)
        flushed = len(events) - table.unflushed(jobid)
        eof = table[jobid].state == JobState.INACTIVE
        keep: list[Watch] = []
        for watch in watches:
            if watch.offset < flushed or eof or not watch.req.payload.get("wait", False):
                chunk = [
                    {"timestamp": e.timestamp, "name": e.name, "context": e.context}
                    for e in events[watch.offset : flushed]
                ]
                watch.req.respond({"events": chunk, "offset": flushed, "eof": eof and flushed == len(events)})
            else:
                keep.append(watch)
        if keep:
            self._eventlog_watches[jobid] = keep
        else:
            del self._eventlog_watches[jobid]

    def _notify_annotations(self, jobid: int) -> None:
        record = self._jm.table[jobid]
        keep = []
        for req, key in self._annotation_waits.pop(jobid, []):
            if key in record.extra:
                req.respond({"annotations": dict(record.extra), "state": record.state.name})
            else:
                keep.append((req, key))
        if keep:
            self._annotation_waits[jobid] = keep
