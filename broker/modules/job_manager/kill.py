"""Exceptions, cancel, raise, kill and time limits."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from typing import Any

from ...jobs.jobid import encode_f58
from ...jobs.record import JobRecord
from ...jobs.states import PENDING, JobState
from ...protocol import EHOSTUNREACH, EINVAL, Message
from ...service import Request, ServiceError
from .core import KILLED, Execution, JobManagerCore


class Kill(JobManagerCore):
    def _exception(self, record: JobRecord, kind: str, note: str, severity: int = 0) -> None:
        was_pending = bool(record.state & PENDING)
        self.post(record, "exception", {"type": kind, "severity": severity, "note": note, "userid": os.getuid()})
        if severity != 0:
            return
        if was_pending:  # never started: nothing to kill
            self.queue.discard(record.jobid)
            self.post(record, "clean")
            self.sched_dirty = True
            self._inactive(record)
            return
        ex = self.execs.get(record.jobid)
        if ex is not None and not ex.killing:
            self._kill(record, ex, signal.SIGTERM)

    def _kill(self, record: JobRecord, ex: Execution, signum: int) -> None:
        ex.killing = True
        self._signal_ranks(record, ex, signum, self.kill_grace)

    def _signal_ranks(self, record: JobRecord, ex: Execution, signum: int, grace: float) -> None:
        """Signal the job's tasks on each of its ranks; a rank that no longer runs them is done (see _gone)."""
        payload = {"id": record.jobid, "gen": ex.gen, "signal": int(signum), "grace": grace}
        for rank in record.ranks:
            self.b.rpc("job-exec.kill", payload, rank, self._on_signaled(record.jobid, ex.gen, rank))

    def _on_signaled(self, jobid: int, gen: int, rank: int) -> Callable[[Message], None]:
        return lambda msg: self._gone(jobid, gen, rank, msg)

    def _gone(self, jobid: int, gen: int, rank: int, msg: Message) -> None:
        """A rank that is unreachable, or whose broker does not run the job (it restarted), will never report
        the job's end there: its part ends now, as killed, so cancel and kill always end the job."""
        ex = self.execs.get(jobid)
        if ex is None or ex.gen != gen or rank not in ex.ranks_left:
            return
        if msg.errnum == EHOSTUNREACH or (not msg.errnum and msg.payload.get("present") is False):
            self._rank_done(self.jobs[jobid], ex, rank, KILLED)

    def _expire(self, jobid: int, gen: int) -> None:
        record = self.jobs[jobid]
        if jobid in self.execs and record.requeues == gen and record.state == JobState.RUN:
            self._exception(record, "timeout", "resource allocation expired")

    def svc_cancel(self, req: Request) -> dict[str, Any]:
        record = self._record(req)
        if record.state == JobState.INACTIVE or (record.state == JobState.CLEANUP and record.jobid not in self.execs):
            raise ServiceError(EINVAL, f"{encode_f58(record.jobid)}: job is inactive")
        note = req.get("note", str, required=False, default="")
        self._exception(record, "cancel", note or "canceled by user")
        return {}

    def svc_raise(self, req: Request) -> dict[str, Any]:
        record = self._record(req)
        if record.state == JobState.INACTIVE:
            raise ServiceError(EINVAL, f"{encode_f58(record.jobid)}: job is inactive")
        kind = req.get("type", str)
        self._exception(record, kind, req.get("note", str, required=False, default=""), req.get("severity", int))
        return {}

    def svc_kill(self, req: Request) -> dict[str, Any]:
        record = self._record(req)
        if record.jobid not in self.execs:
            raise ServiceError(EINVAL, f"{encode_f58(record.jobid)}: job is not running")
        signum = req.get("signal", int, required=False, default=int(signal.SIGTERM))
        self._signal_ranks(record, self.execs[record.jobid], signum, 1e9)
        return {}
