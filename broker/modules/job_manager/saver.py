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
from typing import TYPE_CHECKING

from ...jobs.save_policy import save_policy
from ...jobs.states import JobState
from ...loop import Timer
from ...options import BrokerError, StartRefused
from ...port import BrokerPort
from ...protocol import EINVAL, ENOENT, Message
from ...service import Request, ServiceError
from .roles import ExecutionsRole, QueueRole
from .table import JobTable

if TYPE_CHECKING:
    from ...jobs.archive import Source
    from ...jobs.record import JobRecord

EBUSY = 16
EEXIST = 17
EIO = 5
SAVING = "saving the queue"
UNFIT_CHOICES = ("wait", "reject")


@dataclass
class PendingSave:
    """A save waiting for its running jobs: the request, the archive's path and what it saves."""

    req: Request
    path: str
    source: Source
    requeued: set[int]


class Saver:
    """A save in progress (and the running jobs asked to checkpoint for it), and restored jobs waiting for a
    cluster they fit."""

    def __init__(self, port: BrokerPort, statedir: Path, on_online: Callable[[Callable[[], None]], None]) -> None:
        self._port = port
        self._on_online = on_online
        self._parts: tuple[JobTable, QueueRole, ExecutionsRole] | None = None
        self._saving: PendingSave | None = None
        self._checkpointing: dict[int, Timer] = {}  # jobid -> its timeout timer
        self._unfit: dict[int, str] = {}  # restored jobs waiting for a cluster they fit
        self._restore_unfit = port.attrs.get("job-manager.restore-unfit") or "wait"
        if self._restore_unfit not in UNFIT_CHOICES:
            raise BrokerError(f"job-manager.restore-unfit: {self._restore_unfit!r} is not one of wait, reject")
        self._restored = _restore_archive(port, statedir)

    def wire(self, table: JobTable, queue: QueueRole, executions: ExecutionsRole) -> None:
        """The parts made after this one (it is made first: a restored archive is unpacked before the store is
        read)."""
        self._parts = (table, queue, executions)

    @property
    def _table(self) -> JobTable:
        assert self._parts is not None, "Saver.wire was not called"
        return self._parts[0]

    @property
    def _queue(self) -> QueueRole:
        assert self._parts is not None, "Saver.wire was not called"
        return self._parts[1]

    @property
    def _executions(self) -> ExecutionsRole:
        assert self._parts is not None, "Saver.wire was not called"
        return self._parts[2]

    def started(self) -> None:
        """After the restart path: a queue a save stopped runs again, and restored jobs are checked once online."""
        if self._queue.interrupted_by(SAVING):
            # The lead stopped during a save, before the archive was written: its queue runs again here.
            self._queue.resume()
        if self._restored:
            self._on_online(self._settle_unfit)
            self._port.subscribe("membership.update", lambda _msg: self._retry_unfit())

    # ------------------------------------------------------------------ restore
    def _settle_unfit(self) -> None:
        table, queue = self._table, self._queue
        for jobid in sorted(queue.pending()):
            record = table[jobid]
            if record.jobspec.get("attributes", {}).get("system", {}).get("burstable"):
                continue  # as at submit: a burstable job may need more nodes than are here (bursting/)
            reason = queue.sched.unsatisfiable(table.spec(record).resources)
            if reason is None:
                if (record.extra.get("sched") or {}).get("reason_pending"):  # the last cluster's reason
                    table.post(record, "annotate", {"sched": {"reason_pending": ""}})
                continue
            note = f"does not fit this cluster after restore: {reason}"
            if self._restore_unfit == "reject":
                self._executions.exception(record, "unsatisfiable", note)
            else:
                queue.dequeue(jobid)
                self._unfit[jobid] = note
                table.post(record, "annotate", {"sched": {"reason_pending": note}})
        queue.kick()

    def _retry_unfit(self) -> None:
        """A waiting job joins the queue once the cluster can hold it (e.g. ranks were added)."""
        table, queue = self._table, self._queue
        for jobid in list(self._unfit):
            record = table[jobid]
            if record.state != JobState.SCHED:
                del self._unfit[jobid]
            elif queue.sched.unsatisfiable(table.spec(record).resources) is None:
                del self._unfit[jobid]
                table.post(record, "annotate", {"sched": {"reason_pending": ""}})
                queue.enqueue(jobid)
                queue.kick()

    # ------------------------------------------------------------------ save
    def svc_save(self, req: Request) -> None:
        path = req.get("path", str)
        if not path.startswith("/"):
            raise ServiceError(EINVAL, f"path: {path!r} must be absolute (a path the lead broker can write)")
        if self._saving is not None:
            raise ServiceError(EBUSY, f"a save to {self._saving.path} is already in progress")
        if not Path(path).parent.is_dir():
            raise ServiceError(ENOENT, f"path: directory {Path(path).parent} does not exist: create it first")
        if Path(path).exists() and not req.get("force", bool, required=False, default=False):
            raise ServiceError(EEXIST, f"{path} exists: choose another path, or replace it with --force")
        timeout = req.get("timeout", float, required=False, default=600.0)
        hostnames = list(self._port.hostnames)
        from ...jobs.archive import Source  # the archive module (tarfile, bz2, lzma) loads at the first save

        source = Source(req.get("cluster", str, required=False, default=""), hostnames, len(hostnames))
        self._saving = PendingSave(req, path, source, set())
        self._queue.stop(SAVING)
        table = self._table
        for jobid in self._executions.running():
            record = table[jobid]
            policy = save_policy(record.jobspec)
            if policy.policy == "requeue":
                self._requeue(record, "requeued by a save of the queue")
            elif policy.policy == "checkpoint":
                table.post(record, "annotate", {"save": {"checkpoint": signal.Signals(policy.signal).name}})
                for rank in record.ranks:
                    self._port.rpc("job-exec.kill", {"id": jobid, "signal": policy.signal, "grace": 1e9}, rank, _quiet)
                self._checkpointing[jobid] = self._port.loop.call_later(policy.timeout, self._expiry(jobid))
        # Jobs that finish by policy get until the timeout; then they too are requeued, never lost.
        self._port.loop.call_later(timeout, self._save_deadline)
        table.schedule_flush()
        return None

    def _requeue(self, record: JobRecord, note: str) -> None:
        """Stop a running job and put it back in the queue; the archive counts it as requeued by the save."""
        self._executions.requeue(record, "save", note)
        if self._saving is not None:
            self._saving.requeued.add(record.jobid)

    def checkpointed(self, record: JobRecord) -> bool:
        """A job exited: if it was checkpointing for a save, requeue it instead of finishing it (it resumes after
        the restore)."""
        timer = self._checkpointing.pop(record.jobid, None)
        if timer is None:
            return False
        timer.cancel()
        self._requeue(record, "checkpointed and requeued by a save of the queue")
        return True

    def _expiry(self, jobid: int) -> Callable[[], None]:
        return lambda: self._checkpoint_expired(jobid)

    def _checkpoint_expired(self, jobid: int) -> None:
        if self._checkpointing.pop(jobid, None) is not None and self._executions.is_running(jobid):
            self._requeue(self._table[jobid], "did not exit after its checkpoint signal: requeued by a save")
            self._table.schedule_flush()

    def _save_deadline(self) -> None:
        if self._saving is None:
            return
        for jobid in self._executions.running():
            self._checkpointing.pop(jobid, None)
            self._requeue(self._table[jobid], "still running when the save timed out: requeued")
        self._table.schedule_flush()

    def check(self) -> None:
        """Write the archive once nothing runs and everything is on disk; answer the client."""
        pending = self._saving
        if pending is None or self._executions.count() or self._table.unflushed():
            return
        self._saving = None
        from ...jobs.archive import read_archive, summary, write_archive
        from ...jobs.archive_members import ArchiveError

        try:
            manifest = write_archive(self._table.store, pending.path, pending.source, pending.requeued)
            read_archive(pending.path)  # read back: what was written restores
        except ArchiveError as exc:
            # Nothing lost: the queue starts again as it was, so requeued jobs run here.
            self._queue.resume()
            self._queue.kick()
            pending.req.error(EIO, str(exc))
            return
        pending.req.respond({"path": pending.path, "saved": time.time(), **summary(manifest)})


def _restore_archive(port: BrokerPort, statedir: Path) -> bool:
    """Verify and unpack the archive named by `content.restore` before the store is read; refuse to start
    (saying why, exit refused.EXIT_REFUSED) when it is damaged, foreign or hostile, with the state directory
    untouched."""
    path = port.attrs.get("content.restore")
    if not path:
        return False
    from ...jobs.archive import read_archive, restore_into, restored_before
    from ...jobs.archive_members import ArchiveError

    if restored_before(statedir):
        return True  # a restarted lead: the queue is in its journal (the archive may be gone)
    try:
        archive = read_archive(path, cluster=port.attrs.get("job-manager.restore-cluster") or None)
        restore_into(statedir, archive)
    except ArchiveError as exc:  # wrong for good: no restart reads it differently (broker/refused.py)
        raise StartRefused(f"content.restore: {exc}") from None
    return True


def _quiet(_msg: Message) -> None:
    """Signals whose answers nobody needs."""
