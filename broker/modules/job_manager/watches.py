"""Watches: deferred replies answered when a job reaches the point asked for (job wait, output and eventlog
watches, annotation waits, queue-idle waits), so clients never poll.

`job-manager.wait` is flux-core's (job-manager/wait.c) for jobs submitted waitable: each one's end is kept (a
zombie) until one waiter takes it, by its id or as "any" (FLUX_JOBID_ANY); "any" beyond the waitable jobs left
is ECHILD, as wait(2). Beyond flux-core, a wait by id answers for any job, waitable or not, and one sent
with `keep` (`flux submit --wait`, `flux job status`, the job API's wait) leaves a waitable job's end for
`flux job wait`, as flux-core's tools that watch the eventlog instead do.

`job-manager.wait-all` (ours) waits for a list of jobs with one request and one answer, leaving waitable jobs'
ends as `keep` does: `flux submit --cc=1-1000 --wait` sent a wait per job, each decoded, answered with the job's
whole record and encoded, about an eighth of the broker's CPU per trivial job (issue 45).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ...jobs import submit_flags
from ...jobs.jobid import encode_f58
from ...jobs.record import JobRecord
from ...jobs.states import JobState
from ...membership import UP
from ...protocol import ECHILD, EHOSTUNREACH, EINVAL, ENOENT, Message
from ...service import Request, ServiceError
from .replies import OutputChunk, WaitAllReply
from .roles import ExecutionsRole, InfoRole, QueueRole
from .table import JobTable


@dataclass(frozen=True)
class Watch:
    """A request waiting on a job, and how far into the job's output or eventlog it has read."""

    req: Request
    offset: int


@dataclass(frozen=True)
class GroupWait:
    """A job-manager.wait-all: the jobs asked for, in order, and those not yet inactive."""

    req: Request
    ids: list[int]
    left: set[int]


class Watches:
    """Every request waiting on a job or on the queue."""

    def __init__(self, table: JobTable, queue: QueueRole) -> None:
        self._table = table
        self._queue = queue
        self._parts: tuple[ExecutionsRole, InfoRole] | None = None
        self._waiters: dict[int, list[Request]] = {}  # by id; those without `keep` take a waitable job's end
        self._group_waits: dict[int, list[GroupWait]] = {}  # wait-all requests, by each job they still wait for
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

    def svc_wait_all(self, req: Request) -> None:
        ids = req.get("ids", list)
        if not all(isinstance(jobid, int) and not isinstance(jobid, bool) for jobid in ids):
            raise ServiceError(EINVAL, "job-manager.wait-all: ids: expected a list of job ids")
        table = self._table
        unknown = [jobid for jobid in ids if jobid not in table]
        if unknown:
            raise ServiceError(ENOENT, f"{encode_f58(unknown[0])}: unknown job id")
        wait = GroupWait(req, ids, {jobid for jobid in ids if table[jobid].state != JobState.INACTIVE})
        for jobid in wait.left:
            self._group_waits.setdefault(jobid, []).append(wait)
        if not wait.left:
            self._answer_group(wait)
        return None

    def _answer_group(self, wait: GroupWait) -> None:
        records = [self._table[jobid] for jobid in wait.ids]
        reply: WaitAllReply = {
            "jobs": [
                {
                    "id": r.jobid,
                    "returncode": r.returncode,
                    "success": r.result is not None and r.result.value == "COMPLETED",
                }
                for r in records
            ]
        }
        wait.req.respond(reply)

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
        gone += self._drop_group_waits(dropped)
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

    def _drop_group_waits(self, dropped: Callable[[Request], bool]) -> list[Request]:
        gone: dict[int, Request] = {}
        for jobid, waits in list(self._group_waits.items()):
            kept = [w for w in waits if not dropped(w.req)]
            gone.update((id(w), w.req) for w in waits if dropped(w.req))
            if kept:
                self._group_waits[jobid] = kept
            else:
                del self._group_waits[jobid]
        return list(gone.values())

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
        for wait in self._group_waits.pop(record.jobid, []):
            wait.left.discard(record.jobid)
            if not wait.left:
                self._answer_group(wait)
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
