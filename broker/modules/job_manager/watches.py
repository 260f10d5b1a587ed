"""Watches: deferred replies answered when a job reaches the point asked for (job wait, output and eventlog
watches, annotation waits, queue-idle waits), so clients never poll.

`job-manager.wait` is flux-core's (job-manager/wait.c) for jobs submitted waitable: each one's end is kept (a
zombie) until one waiter takes it, by its id or as "any" (FLUX_JOBID_ANY); "any" beyond the waitable jobs left
is ECHILD, as wait(2). Beyond flux-core, a wait by id answers for any job, waitable or not, and one sent
with `keep` (`flux submit --wait`, `flux job status`, the job API's wait) leaves a waitable job's end for
`flux job wait`, as flux-core's tools that watch the eventlog instead do.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ...jobs import submit_flags
from ...jobs.record import JobRecord
from ...jobs.states import JobState
from ...membership import UP
from ...protocol import ECHILD, EHOSTUNREACH, Message
from ...service import Request
from .replies import OutputChunk
from .roles import ExecutionsRole, InfoRole, QueueRole
from .table import JobTable


@dataclass(frozen=True)
class Watch:
    """A request waiting on a job, and how far into the job's output or eventlog it has read."""

    req: Request
    offset: int


class Watches:
    """Every request waiting on a job or on the queue."""

    def __init__(self, table: JobTable, queue: QueueRole) -> None:
        self._table = table
        self._queue = queue
        self._parts: tuple[ExecutionsRole, InfoRole] | None = None
        self._waiters: dict[int, list[Request]] = {}  # by id; those without `keep` take a waitable job's end
        self._zombies: dict[int, None] = {}  # waitable jobs ended and not yet waited for, oldest first
        self._any_waiters: list[Request] = []  # waits for whichever waitable job ends next
        self._waitable_active = 0
        self._waitable_waiters = 0  # waitable active jobs someone waits for by id: each spoken for
        self._output_watches: dict[int, list[Watch]] = {}
        self._eventlog_watches: dict[int, list[Watch]] = {}
        self._annotation_waits: dict[int, list[tuple[Request, str]]] = {}
        self._idle_waits: list[tuple[Request, str]] = []

    def wire(self, executions: ExecutionsRole, queries: InfoRole) -> None:
        """The parts made after this one: the running jobs' output and count, and the jobs' views answers carry."""
        self._parts = (executions, queries)

    @property
    def _executions(self) -> ExecutionsRole:
        assert self._parts is not None, "Watches.wire was not called"
        return self._parts[0]

    @property
    def _queries(self) -> InfoRole:
        assert self._parts is not None, "Watches.wire was not called"
        return self._parts[1]

    # ------------------------------------------------------------------ services
    def svc_wait(self, req: Request) -> None:
        if req.get("id", int) == submit_flags.JOBID_ANY:
            self._wait_any(req)
            return None
        record = self._table.record(req)
        keep = req.get("keep", bool, required=False, default=False)
        if record.state == JobState.INACTIVE:
            if not keep:
                self._zombies.pop(record.jobid, None)
            req.respond(self._queries.info(record))
            return None
        waiters = self._waiters.setdefault(record.jobid, [])
        spoken_for = self._takes(waiters)
        waiters.append(req)
        if record.flags & submit_flags.WAITABLE and not spoken_for and self._takes(waiters):
            self._waitable_waiters += 1
            self._refuse_any_beyond_waitables()
        return None

    @staticmethod
    def _takes(waiters: list[Request]) -> bool:
        """Whether one of these waits by id takes the job's end (was sent without `keep`)."""
        return any(not r.payload.get("keep") for r in waiters)

    def _wait_any(self, req: Request) -> None:
        if self._zombies:
            jobid = next(iter(self._zombies))
            del self._zombies[jobid]
            req.respond(self._queries.info(self._table[jobid]))
            return
        self._any_waiters.append(req)
        self._refuse_any_beyond_waitables()

    def _refuse_any_beyond_waitables(self) -> None:
        """More waiters than waitable jobs left: the newest "any" waiter can never be answered."""
        if self._any_waiters and len(self._any_waiters) + self._waitable_waiters > self._waitable_active:
            self._any_waiters.pop().error(ECHILD, "there are no more waitable jobs")

    def submitted(self, record: JobRecord) -> None:
        """A new (or restored) active job: a waitable one will be waited for."""
        if record.flags & submit_flags.WAITABLE:
            self._waitable_active += 1

    def client_gone(self, origin: tuple[str, ...]) -> None:
        """A client went away, here or on another broker: its waits must not take a job's end with them."""
        self._drop_waits(lambda req: req.origin == origin)  # nobody to answer

    def on_membership(self, msg: Message) -> None:
        """Ranks lost: waits that came through them are answered with an error (their clients are most likely
        gone with the broker; one that is not, after a rejoin, is told instead of left waiting) and take no
        job's end."""
        lost = {f"r:{key}" for key, state in msg.payload.get("ranks", {}).items() if state != UP}
        if not lost:
            return
        for req in self._drop_waits(lambda req: not lost.isdisjoint(req.origin)):
            req.error(EHOSTUNREACH, "job-manager.wait: the broker this wait came through was lost")

    def _drop_waits(self, dropped: Callable[[Request], bool]) -> list[Request]:
        """Forget the waits `dropped` selects (keeping the counts of spoken-for jobs right); returns them."""
        gone = [r for r in self._any_waiters if dropped(r)]
        self._any_waiters = [r for r in self._any_waiters if not dropped(r)]
        for jobid, waiters in list(self._waiters.items()):
            kept = [r for r in waiters if not dropped(r)]
            if len(kept) == len(waiters):
                continue
            gone += [r for r in waiters if dropped(r)]
            if kept:
                self._waiters[jobid] = kept
            else:
                del self._waiters[jobid]
            if self._table[jobid].flags & submit_flags.WAITABLE and self._takes(waiters) > self._takes(kept):
                self._waitable_waiters -= 1
        return gone

    def svc_output(self, req: Request) -> None:
        record = self._table.record(req)
        offset = req.get("offset", int, required=False, default=0)
        self._output_watches.setdefault(record.jobid, []).append(Watch(req, offset))
        self.notify_output(record.jobid)
        return None

    def svc_eventlog(self, req: Request) -> None:
        record = self._table.record(req)
        offset = req.get("offset", int, required=False, default=0)
        self._eventlog_watches.setdefault(record.jobid, []).append(Watch(req, offset))
        self._notify_eventlog(record.jobid)
        return None

    def svc_annotation_wait(self, req: Request) -> None:
        record = self._table.record(req)
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
            info = self._queries.info(record)
            for req in waiters:
                req.respond(info)
        if not record.flags & submit_flags.WAITABLE:
            return
        self._waitable_active -= 1
        if self._takes(waiters):
            self._waitable_waiters -= 1
        elif self._any_waiters:
            self._any_waiters.pop(0).respond(self._queries.info(record))
        else:
            self._zombies[record.jobid] = None

    def annotations_ended(self, record: JobRecord) -> None:
        """The job is inactive: its annotations will not change any more."""
        for req, _key in self._annotation_waits.pop(record.jobid, []):
            req.respond({"annotations": dict(record.extra), "state": record.state.name})

    def notify_output(self, jobid: int) -> None:
        watches = self._output_watches.get(jobid)
        if not watches:
            return
        record = self._table[jobid]
        lines = self._executions.lines(jobid)
        eof = record.state == JobState.INACTIVE
        keep: list[Watch] = []
        for watch in watches:
            if watch.offset < len(lines) or eof or not watch.req.payload.get("wait", False):
                payload: OutputChunk = {"lines": lines[watch.offset :], "offset": len(lines), "eof": eof}
                if eof:
                    payload["info"] = self._queries.info(record)
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
        active = self._table.active_count
        running = self._executions.count()
        keep = []
        for req, mode in self._idle_waits:
            done = not running if mode == "idle" else active == 0
            if done:
                req.respond({"pending": len(self._queue.pending()), "running": running})
            else:
                keep.append((req, mode))
        self._idle_waits = keep

    # ------------------------------------------------------------------ answering
    def _notify_eventlog(self, jobid: int) -> None:
        watches = self._eventlog_watches.get(jobid)
        if not watches:
            return
        table = self._table
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
        record = self._table[jobid]
        keep = []
        for req, key in self._annotation_waits.pop(jobid, []):
            if key in record.extra:
                req.respond({"annotations": dict(record.extra), "state": record.state.name})
            else:
                keep.append((req, key))
        if keep:
            self._annotation_waits[jobid] = keep
