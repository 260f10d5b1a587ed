"""Save and restore the queue (`minicluster save`, `minicluster up --restore`): the archive is the job store's own
files (broker/jobs/archive.py), so a restored queue comes back through the one restore path (restart.py).

Saving stops the queue and submissions, settles each running job by its policy (broker/jobs/save_policy.py:
finish, requeue, or checkpoint through the job's signal), and writes the archive once nothing runs (a deferred
reply: the client is answered then). Restoring happens before the store is read: the archive (the broker
attribute `content.restore`, the Flux Operator's spelling) is verified, then appended to the empty state
directory. Once the instance is online, a restored job that can never fit this cluster (the scheduler's own
feasibility check, elasticity.policy.allocate.never_fits) is rejected with the reason or waits with the reason
as its annotation, as `job-manager.restore-unfit` (reject|wait) says.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...broker_core import BrokerError, StartRefused
from ...jobs.archive import (
    ArchiveError,
    Source,
    read_archive,
    restore_into,
    restored_before,
    summary,
    write_archive,
)
from ...jobs.record import JobRecord
from ...jobs.save_policy import save_policy
from ...jobs.states import JobState
from ...protocol import EINVAL, ENOENT, Message
from ...service import Request, ServiceError
from .core import EEXIST, Execution, JobManagerCore

if TYPE_CHECKING:
    from ...broker import Broker

EBUSY = 16
EIO = 5
SAVING = "saving the queue"
UNFIT_CHOICES = ("wait", "reject")


@dataclass
class PendingSave:
    req: Request
    path: str
    source: Source
    requeued: set[int]


class Save(JobManagerCore):
    def __init__(self, broker: Broker) -> None:
        self.saving: PendingSave | None = None
        self.checkpointing: dict[int, Any] = {}  # jobid -> its timeout timer
        self.unfit: dict[int, str] = {}  # restored jobs waiting for a cluster they fit
        self.restore_unfit = broker.attrs.get("job-manager.restore-unfit") or "wait"
        if self.restore_unfit not in UNFIT_CHOICES:
            raise BrokerError(f"job-manager.restore-unfit: {self.restore_unfit!r} is not one of wait, reject")
        self.restored = self._restore_archive(broker)
        super().__init__(broker)
        if SAVING in (self.sched_reason, self.submit_reason):
            # The lead stopped during a save, before the archive was written: its queue runs again here.
            self.sched_started, self.sched_reason = True, ""
            self.submit_enabled, self.submit_reason = True, ""
            self._save_queue_state()
        if self.restored:
            broker.on_online(self._settle_unfit)
            broker.subscribe("membership.update", lambda _msg: self._retry_unfit())

    # ------------------------------------------------------------------ restore
    @staticmethod
    def _restore_archive(broker: Broker) -> bool:
        """Verify and unpack the archive named by `content.restore` before the store is read; refuse to start
        (saying why, exit refused.EXIT_REFUSED) when it is damaged, foreign or hostile, with the state directory
        untouched."""
        path = broker.attrs.get("content.restore")
        if not path:
            return False
        statedir = Path(broker.attrs.get("statedir") or f"{broker.rundir}/state")
        if restored_before(statedir):
            return True  # a restarted lead: the queue is in its journal (the archive may be gone)
        try:
            archive = read_archive(path, cluster=broker.attrs.get("job-manager.restore-cluster") or None)
            restore_into(statedir, archive)
        except ArchiveError as exc:  # wrong for good: no restart reads it differently (broker/refused.py)
            raise StartRefused(f"content.restore: {exc}") from None
        return True

    def _settle_unfit(self) -> None:
        for jobid in sorted(self.queue):
            record = self.jobs[jobid]
            if record.jobspec.get("attributes", {}).get("system", {}).get("burstable"):
                continue  # as at submit: a burstable job may need more nodes than are here (bursting/)
            reason = self.sched.unsatisfiable(self._spec(record).resources)
            if reason is None:
                if (record.extra.get("sched") or {}).get("reason_pending"):  # the last cluster's reason
                    self.post(record, "annotate", {"sched": {"reason_pending": ""}})
                continue
            note = f"does not fit this cluster after restore: {reason}"
            if self.restore_unfit == "reject":
                self._exception(record, "unsatisfiable", note)
            else:
                self.queue.discard(jobid)
                self._order = None
                self.unfit[jobid] = note
                self.post(record, "annotate", {"sched": {"reason_pending": note}})
        self.kick_sched()

    def _retry_unfit(self) -> None:
        """A waiting job joins the queue once the cluster can hold it (e.g. ranks were added)."""
        for jobid in list(self.unfit):
            record = self.jobs[jobid]
            if record.state != JobState.SCHED:
                del self.unfit[jobid]
            elif self.sched.unsatisfiable(self._spec(record).resources) is None:
                del self.unfit[jobid]
                self.post(record, "annotate", {"sched": {"reason_pending": ""}})
                self._enqueue(jobid)
                self.kick_sched()

    # ------------------------------------------------------------------ save
    def svc_save(self, req: Request) -> None:
        path = req.get("path", str)
        if not path.startswith("/"):
            raise ServiceError(EINVAL, f"path: {path!r} must be absolute (a path the lead broker can write)")
        if self.saving is not None:
            raise ServiceError(EBUSY, f"a save to {self.saving.path} is already in progress")
        if not Path(path).parent.is_dir():
            raise ServiceError(ENOENT, f"path: directory {Path(path).parent} does not exist: create it first")
        if Path(path).exists() and not req.get("force", bool, required=False, default=False):
            raise ServiceError(EEXIST, f"{path} exists: choose another path, or replace it with --force")
        timeout = req.get("timeout", float, required=False, default=600.0)
        hostnames = list(self.b.config.hostnames)
        source = Source(req.get("cluster", str, required=False, default=""), hostnames, len(hostnames))
        self.saving = PendingSave(req, path, source, set())
        self.sched_started, self.sched_reason = False, SAVING
        self.submit_enabled, self.submit_reason = False, SAVING
        self._save_queue_state()
        for jobid, ex in list(self.execs.items()):
            record = self.jobs[jobid]
            policy = save_policy(record.jobspec)
            if policy.policy == "requeue":
                self._save_requeue(record, ex, "requeued by a save of the queue")
            elif policy.policy == "checkpoint":
                self.post(record, "annotate", {"save": {"checkpoint": signal.Signals(policy.signal).name}})
                for rank in record.ranks:
                    self.b.rpc("job-exec.kill", {"id": jobid, "signal": policy.signal, "grace": 1e9}, rank, _quiet)
                self.checkpointing[jobid] = self.b.loop.call_later(policy.timeout, self._expiry(jobid))
        # Jobs that finish by policy get until the timeout; then they too are requeued, never lost.
        self.b.loop.call_later(timeout, self._save_deadline)
        self._schedule_flush()
        return None

    def _save_requeue(self, record: JobRecord, ex: Execution, note: str) -> None:
        """Stop a running job and put it back in the queue; its output so far is kept as this attempt's."""
        jobid = record.jobid
        lines = self.output.pop(jobid, [])
        if lines:
            self.store.save_attempt_output(jobid, record.requeues, lines)
        files = self.output_files.pop(jobid, None)
        if files is not None:
            files.close()
        self.post(record, "exception", {"type": "save", "severity": 1, "note": note})
        self._kill(record, ex, signal.SIGKILL)
        for timer in ex.timers:
            timer.cancel()
        del self.execs[jobid]
        self.post(record, "requeue", {"note": note})
        self._enqueue(jobid)
        if self.saving is not None:
            self.saving.requeued.add(jobid)

    def _checkpointed(self, record: JobRecord, ex: Execution) -> bool:
        """A checkpointing job exited: requeue it instead of finishing it (it resumes after the restore)."""
        timer = self.checkpointing.pop(record.jobid, None)
        if timer is None:
            return False
        timer.cancel()
        self._save_requeue(record, ex, "checkpointed and requeued by a save of the queue")
        return True

    def _expiry(self, jobid: int) -> Callable[[], None]:
        return lambda: self._checkpoint_expired(jobid)

    def _checkpoint_expired(self, jobid: int) -> None:
        ex = self.execs.get(jobid)
        if self.checkpointing.pop(jobid, None) is not None and ex is not None:
            self._save_requeue(self.jobs[jobid], ex, "did not exit after its checkpoint signal: requeued by a save")
            self._schedule_flush()

    def _save_deadline(self) -> None:
        if self.saving is None:
            return
        for jobid, ex in list(self.execs.items()):
            self.checkpointing.pop(jobid, None)
            self._save_requeue(self.jobs[jobid], ex, "still running when the save timed out: requeued")
        self._schedule_flush()

    def _check_save(self) -> None:
        """Write the archive once nothing runs and everything is on disk; answer the client."""
        pending = self.saving
        if pending is None or self.execs or self.buffer:
            return
        self.saving = None
        try:
            manifest = write_archive(self.store, pending.path, pending.source, pending.requeued)
            read_archive(pending.path)  # read back: what was written restores
        except ArchiveError as exc:
            # Nothing lost: the queue starts again as it was, so requeued jobs run here.
            self.sched_started, self.sched_reason = True, ""
            self.submit_enabled, self.submit_reason = True, ""
            self._save_queue_state()
            self.kick_sched()
            pending.req.error(EIO, str(exc))
            return
        pending.req.respond({"path": pending.path, "saved": time.time(), **summary(manifest)})


def _quiet(_msg: Message) -> None:
    """Signals whose answers nobody needs."""
