"""The job table: every job's record and eventlog, the journal's group commit, and the job store.

The only writer of job records. Every change to a job is an event applied here to its record and appended to the
journal with a group commit (one write and fsync per loop batch) before any submission is acknowledged; after
each commit it calls `on_commit` with the jobs touched (the composer, JobManager.committed, tells the other
parts).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ...jobs.jobid import FluidGenerator, encode_f58
from ...jobs.jobspec import JobSpec, parse_jobspec
from ...jobs.journal import JobEvent
from ...jobs.journal_writer import JournalWriter
from ...jobs.record import JobRecord, replay
from ...jobs.shapes import Jobspec
from ...jobs.states import JobState
from ...jobs.store import JobStore, QueueState
from ...port import BrokerPort
from ...protocol import ENOENT
from ...service import Request, ServiceError
from .replies import SubmitAck
from .roles import OutputLine


class JobTable:
    """Records, eventlogs, parsed jobspecs, the unflushed journal batch and the store."""

    def __init__(self, port: BrokerPort, store: JobStore, epoch_ms: int, on_commit: Callable[[set[int]], None]) -> None:
        self._port = port
        self._on_commit = on_commit
        self._store = store
        self._writer = JournalWriter(store.journal, port.loop)
        self._fluids = FluidGenerator(0, epoch_ms=epoch_ms)
        self._jobs: dict[int, JobRecord] = {}
        self._eventlogs: dict[int, list[JobEvent]] = {}
        self._specs: dict[int, JobSpec] = {}
        self._views: dict[int, dict[str, str]] = {}  # listed jobs' views as JSON by kind, dropped at the next event
        self._buffer: list[JobEvent] = []
        self._acks: list[tuple[Request, SubmitAck]] = []
        self._flush_scheduled = False
        self._active_count = 0
        self._last_id = 0
        self._environment: dict[str, str] = {}  # the last job's, which the next one's shares when equal

    # ------------------------------------------------------------------ reading
    def get(self, jobid: int) -> JobRecord | None:
        return self._jobs.get(jobid)

    def __getitem__(self, jobid: int) -> JobRecord:
        return self._jobs[jobid]

    def __contains__(self, jobid: object) -> bool:
        return jobid in self._jobs

    def __iter__(self) -> Iterator[int]:
        return iter(self._jobs)

    def records(self) -> Iterable[JobRecord]:
        return self._jobs.values()

    def record(self, req: Request) -> JobRecord:
        """The job a request names by `id`, or ENOENT."""
        jobid = req.get("id", int)
        record = self._jobs.get(jobid)
        if record is None:
            raise ServiceError(ENOENT, f"{encode_f58(jobid)}: unknown job id")
        return record

    def spec(self, record: JobRecord) -> JobSpec:
        """The job's parsed jobspec (kept while the job is active)."""
        spec = self._specs.get(record.jobid)
        if spec is None:
            spec = self._specs[record.jobid] = parse_jobspec(record.jobspec)
        return spec

    def encoded_view(self, record: JobRecord, kind: str, encode: Callable[[JobRecord], str], keep: bool) -> str:
        """The job's view of this kind as JSON (`encode` makes it), kept until the job's next event when `keep`
        says the view changes only with events: a listing of 5,000 jobs re-encodes only what changed (issue 27)."""
        if not keep:
            return encode(record)
        views = self._views.get(record.jobid)
        if views is None:
            views = self._views[record.jobid] = {}
        text = views.get(kind)
        if text is None:
            text = views[kind] = encode(record)
        return text

    def views_kept(self) -> dict[str, int]:
        """How many jobs have a kept view, by kind (job-manager.stats shows it)."""
        counts: dict[str, int] = {}
        for views in self._views.values():
            for kind in views:
                counts[kind] = counts.get(kind, 0) + 1
        return counts

    def eventlog(self, jobid: int) -> list[JobEvent]:
        return self._eventlogs.get(jobid, [])

    def unflushed(self, jobid: int | None = None) -> int:
        """Events not yet on disk (of one job, or of all)."""
        if jobid is None:
            return len(self._buffer)
        return sum(1 for e in self._buffer if e.jobid == jobid)

    @property
    def active_count(self) -> int:
        return self._active_count

    @property
    def store(self) -> JobStore:
        """The store, for readers of saved files (the archive writer); written only through this table."""
        return self._store

    # ------------------------------------------------------------------ writing
    def create(self, jobspec: Jobspec, spec: JobSpec, userid: int, urgency: int, flags: int) -> JobRecord:
        """A new job: a FLUID, its record, and its submit event in the next commit."""
        jobid = self._fluids.next(self._last_id)
        self._last_id = jobid
        record = JobRecord(
            jobid=jobid, jobspec=jobspec, userid=userid, urgency=urgency, t_submit=time.time(), flags=flags
        )
        self._jobs[jobid] = record
        self._active_count += 1
        self._specs[jobid] = spec
        context = {"jobspec": jobspec, "userid": userid, "urgency": urgency, "flags": flags}
        event = JobEvent(jobid, "submit", record.t_submit, context)
        record.apply(event)
        self._eventlogs[jobid] = [event]
        self._buffer.append(event)
        return record

    def share_environment(self, jobspec: Jobspec) -> None:
        """A job's environment equal to the last job's becomes that same dict: jobs submitted together (`--cc`, a
        script's loop) carry one environment, which was more than half of a queued job's memory (issue 41).
        Jobspecs are never changed once submitted, so sharing is safe."""
        system = jobspec.get("attributes", {}).get("system", {})
        environment = system.get("environment") if isinstance(system, dict) else None
        if not isinstance(environment, dict) or not environment:
            return
        if environment == self._environment:
            system["environment"] = self._environment
        else:
            self._environment = environment

    def post(self, record: JobRecord, name: str, context: dict[str, Any] | None = None) -> JobEvent:  # open: per event
        """Apply an event to a job's record and journal it in the next commit."""
        event = JobEvent(record.jobid, name, time.time(), context or {})
        record.apply(event)
        self._views.pop(record.jobid, None)
        self._eventlogs.setdefault(record.jobid, []).append(event)
        self._buffer.append(event)
        self.schedule_flush()
        return event

    def ack_after_commit(self, req: Request, payload: SubmitAck) -> None:
        """Answer `req` once what it changed is on disk."""
        self._acks.append((req, payload))
        self.schedule_flush()

    def retire(self, jobid: int) -> None:
        """The job became inactive: it no longer counts as active, and its parsed jobspec is dropped."""
        self._active_count -= 1
        self._specs.pop(jobid, None)

    def recover(self, events: list[JobEvent]) -> None:
        """Rebuild every job from its saved events (the one restore path; restart.py settles them)."""
        self._jobs = replay(events)
        self._views.clear()
        for record in self._jobs.values():
            self.share_environment(record.jobspec)
        for event in events:
            if event.jobid in self._jobs:
                self._eventlogs.setdefault(event.jobid, []).append(event)
        self._active_count = sum(1 for r in self._jobs.values() if r.state != JobState.INACTIVE)
        self._last_id = max([self._last_id, *self._jobs])

    def schedule_flush(self) -> None:
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._port.loop.call_later(0, self.flush)

    def flush(self) -> None:
        """Group commit: one write + fsync for everything since the last flush, then acknowledge and notify.

        The write and fsync run on the journal writer's thread (broker/jobs/journal_writer.py), so the loop
        answers other requests meanwhile; what follows the write runs in `_flushed`, once the batch is on disk.
        Events stay in the buffer (and acks in theirs) until then: to everything else they are not yet written.
        While a batch is in flight the next one gathers, and goes when it lands."""
        self._flush_scheduled = False
        if self._writer.busy:
            return  # _flushed flushes again
        events, acks = len(self._buffer), len(self._acks)
        if not events:
            self._flushed(0, acks)  # nothing to write (a scheduling kick): no fsync to wait for
            return
        self._writer.append(self._buffer[:events], lambda: self._flushed(events, acks))

    def _flushed(self, count: int, nacks: int) -> None:
        events, acks = self._buffer[:count], self._acks[:nacks]
        del self._buffer[:count], self._acks[:nacks]
        for req, payload in acks:
            req.respond(payload)
        self._on_commit({e.jobid for e in events})
        if self._buffer or self._acks:
            self.schedule_flush()

    # ------------------------------------------------------------------ saved files
    def save_output(self, jobid: int, lines: list[OutputLine]) -> None:
        self._store.save_output(jobid, lines)

    def save_attempt_output(self, jobid: int, attempt: int, lines: list[OutputLine]) -> None:
        self._store.save_attempt_output(jobid, attempt, lines)

    def load_output(self, jobid: int) -> list[OutputLine] | None:
        return self._store.load_output(jobid)

    def save_queue(self, state: QueueState) -> None:
        self._store.save_queue(state, time.time())

    def close(self) -> None:
        """At shutdown: the batch in flight reaches the disk, then the files close."""
        self._writer.close()
        self._store.close()
