"""The job manager's state and its event core: every change to a job is an event applied to its record and
appended to the journal with a group commit (one fsync per loop batch) before any submission is acknowledged.

The concerns live beside this module, as in flux-core's job-manager: submit.py, queue.py (scheduling, urgency,
`flux queue`), start.py (exec, completion, lost ranks), kill.py (exceptions, cancel, timeouts), journal.py
(eventlogs and output), wait.py (waits, watches, queries), restart.py (the one restore path). Saved state has
one owner, broker/jobs/store.py. Methods one concern calls in another are declared below and defined there.
"""

from __future__ import annotations

import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...jobs.jobid import FluidGenerator, encode_f58
from ...jobs.jobspec import JobSpec, parse_jobspec
from ...jobs.journal import JobEvent
from ...jobs.journal_writer import JournalWriter
from ...jobs.output_files import OutputFiles
from ...jobs.record import JobRecord
from ...jobs.store import JobStore, QueueState
from ...protocol import ENOENT, Message
from ...service import Request, ServiceError
from ..scheduler import Scheduler

if TYPE_CHECKING:
    from ...broker import Broker

EPERM = 1
EEXIST = 17
ENOSPC = 28
DEFAULT_KILL_GRACE = 5.0
KILLED = signal.SIGKILL  # wait status of a task that died with its broker
LOST_NOTE = "lead broker restarted while the job was running; its tasks were lost"
OUTPUT_CACHE = 256  # inactive jobs whose output stays in memory (the rest is read back from disk)


@dataclass
class Execution:
    """A running job's exec bookkeeping (not journaled: rebuilt as 'lost' after a restart)."""

    spec: JobSpec
    gen: int
    ranks_left: set[int]
    status: int = 0
    started: int = 0
    timers: list[Any] = field(default_factory=list)
    killing: bool = False


@dataclass
class Watch:
    req: Request
    offset: int


class JobManagerCore:
    """State shared by every concern, the event core, and the methods concerns call in each other."""

    def __init__(self, broker: Broker) -> None:
        self.b = broker
        statedir = Path(broker.attrs.get("statedir") or f"{broker.rundir}/state")
        self.store = JobStore(statedir, fsync=broker.attrs.boolean("job-manager.fsync", True))
        self.writer = JournalWriter(self.store.journal, broker.loop)
        saved = self.store.restore(now_ms=int(broker.starttime * 1000))
        self.kill_grace = broker.attrs.duration("job-exec.kill-timeout", DEFAULT_KILL_GRACE)
        self.restart_policy = broker.attrs.get("job-manager.restart-policy") or "fail"
        self.sched = Scheduler(broker, broker.attrs.get("sched.queue-policy", "fcfs") or "fcfs")
        self.fluids = FluidGenerator(0, epoch_ms=saved.epoch_ms)
        self.jobs: dict[int, JobRecord] = {}
        self.eventlogs: dict[int, list[JobEvent]] = {}
        self.output: dict[int, list[list[Any]]] = {}
        self.output_files: dict[int, OutputFiles] = {}  # --output/--error files, open while the job runs
        self.execs: dict[int, Execution] = {}
        self.specs: dict[int, JobSpec] = {}
        self.queue: set[int] = set()  # jobs in SCHED
        self._order: list[int] | None = None  # the queue sorted by priority, then submission
        self.queue_depth = broker.attrs.integer("sched.queue-depth", 256, minimum=1) or 256
        self.active_count = 0
        self.waiters: dict[int, list[Request]] = {}
        self.out_watch: dict[int, list[Watch]] = {}
        self.log_watch: dict[int, list[Watch]] = {}
        self.annot_watch: dict[int, list[tuple[Request, str]]] = {}
        self.idle_watch: list[tuple[Request, str]] = []
        self.buffer: list[JobEvent] = []
        self.acks: list[tuple[Request, dict[str, Any]]] = []
        self.flush_scheduled = False
        self.sched_dirty = False
        self.sched_started = True
        self.sched_reason = ""
        self.submit_enabled = True
        self.submit_reason = ""
        self.orphans: set[int] = set()
        self.drain_noted: dict[int, str] = {}
        """Pending jobs given "waiting for drained ranks" as their reason, and the words given."""
        self.last_id = 0
        self._apply_queue_state(saved.queue)
        self._recover(saved.events)
        broker.subscribe("membership.update", self.on_membership)
        broker.on_online(self.kick_sched)
        broker.on_close(self._close_store)

    def _close_store(self) -> None:
        """At shutdown: the batch in flight reaches the disk, then the files close."""
        self.writer.close()
        self.store.close()

    def post(self, record: JobRecord, name: str, context: dict[str, Any] | None = None) -> JobEvent:
        event = JobEvent(record.jobid, name, time.time(), context or {})
        record.apply(event)
        self.eventlogs.setdefault(record.jobid, []).append(event)
        self.buffer.append(event)
        self._schedule_flush()
        return event

    def _schedule_flush(self) -> None:
        if not self.flush_scheduled:
            self.flush_scheduled = True
            self.b.loop.call_later(0, self.flush)

    def flush(self) -> None:
        """Group commit: one write + fsync for everything since the last flush, then acknowledge and notify.

        The write and fsync run on the journal writer's thread (broker/jobs/journal_writer.py), so the loop
        answers other requests meanwhile; what follows the write runs in `_flushed`, once the batch is on disk.
        Events stay in `buffer` (and acks in `acks`) until then: to everything else they are not yet written.
        While a batch is in flight the next one gathers, and goes when it lands."""
        self.flush_scheduled = False
        if self.writer.busy:
            return  # _flushed flushes again
        events, acks = len(self.buffer), len(self.acks)
        if not events:
            self._flushed(0, acks)  # nothing to write (a scheduling kick): no fsync to wait for
            return
        self.writer.append(self.buffer[:events], lambda: self._flushed(events, acks))

    def _flushed(self, count: int, nacks: int) -> None:
        events, acks = self.buffer[:count], self.acks[:nacks]
        del self.buffer[:count], self.acks[:nacks]
        for req, payload in acks:
            req.respond(payload)
        touched = {e.jobid for e in events}
        for jobid in touched:
            self._notify_eventlog(jobid)
        for jobid in touched & set(self.annot_watch):
            self._notify_annotations(jobid)
        if self.sched_dirty:
            self.schedule()
        self._check_idle()
        self._check_save()
        if self.buffer or self.acks:
            self._schedule_flush()

    def kick_sched(self) -> None:
        self.sched_dirty = True
        self._schedule_flush()

    def _priority(self, urgency: int) -> int:
        """Flux's default priority plugin: priority = urgency, 0 = held, 31 = expedite (highest)."""
        return 2**32 - 1 if urgency == 31 else urgency

    def _requeue_allowed(self, record: JobRecord) -> bool:
        system = record.jobspec.get("attributes", {}).get("system", {})
        return str(system.get("requeue", "")).lower() in ("1", "true", "yes", "on")

    def _record(self, req: Request) -> JobRecord:
        jobid = req.get("id", int)
        record = self.jobs.get(jobid)
        if record is None:
            raise ServiceError(ENOENT, f"{encode_f58(jobid)}: unknown job id")
        return record

    def _spec(self, record: JobRecord) -> JobSpec:
        spec = self.specs.get(record.jobid)
        if spec is None:
            spec = self.specs[record.jobid] = parse_jobspec(record.jobspec)
        return spec

    # ------------------------------------------------------------------ defined by the concerns (see the module doc)
    def _output_files(self, record: JobRecord) -> OutputFiles | None:
        raise NotImplementedError

    def _lines(self, jobid: int) -> list[list[Any]]:
        raise NotImplementedError

    def _notify_eventlog(self, jobid: int) -> None:
        raise NotImplementedError

    def _save_output(self, jobid: int) -> None:
        raise NotImplementedError

    def _exception(self, record: JobRecord, kind: str, note: str, severity: int = 0) -> None:
        raise NotImplementedError

    def _expire(self, jobid: int, gen: int) -> None:
        raise NotImplementedError

    def _kill(self, record: JobRecord, ex: Execution, signum: int) -> None:
        raise NotImplementedError

    def _rank_done(self, record: JobRecord, ex: Execution, rank: int, status: int) -> None:
        raise NotImplementedError

    def _apply_queue_state(self, state: QueueState) -> None:
        raise NotImplementedError

    def _check_idle(self) -> None:
        raise NotImplementedError

    def _save_queue_state(self) -> None:
        raise NotImplementedError

    def _check_save(self) -> None:
        raise NotImplementedError

    def _checkpointed(self, record: JobRecord, ex: Execution) -> bool:
        raise NotImplementedError

    def _enqueue(self, jobid: int) -> None:
        raise NotImplementedError

    def schedule(self) -> None:
        raise NotImplementedError

    def _recover(self, events: list[JobEvent]) -> None:
        raise NotImplementedError

    def _inactive(self, record: JobRecord) -> None:
        raise NotImplementedError

    def _post_release(self, record: JobRecord) -> None:
        raise NotImplementedError

    def _start(self, record: JobRecord, allocation: dict[int, list[int]]) -> None:
        raise NotImplementedError

    def on_membership(self, msg: Message) -> None:
        raise NotImplementedError

    def _info(self, record: JobRecord) -> dict[str, Any]:
        raise NotImplementedError

    def _notify_annotations(self, jobid: int) -> None:
        raise NotImplementedError

    def _notify_output(self, jobid: int) -> None:
        raise NotImplementedError


def _slots(resource: dict[str, Any]) -> int:
    count = resource.get("count", 1)
    count = count if isinstance(count, int) else 1
    if resource.get("type") == "node":
        inner = resource.get("with", [{}])[0]
        return count * _slots(inner)
    return count


def _ignore(_msg: Message) -> None:
    """Fire-and-forget: kills and reports whose answers nobody needs."""
