"""What the job manager's parts ask of one another: small protocols, so each part is given its collaborators
(by the composer, JobManager) and tested with fakes, and no part imports the composer or a part that imports it
back. The job table (table.py) is concrete: it depends on no other part.
"""

from __future__ import annotations

from collections.abc import Set
from typing import Any, Protocol

from ...jobs.record import JobRecord
from ...jobs.shapes import JobInfoRecord
from ..scheduler import Scheduler

Allocation = dict[int, list[int]]
"""rank -> core ids of a job's allocation."""
Holding = tuple[int, Allocation, float, float]
"""(jobid, allocation, t_run, duration) of a job holding resources (the scheduler's running jobs)."""
OutputLine = list[Any]  # open: [stream, taskrank, text] as job-exec sends it (JSON array of mixed types)


class QueueRole(Protocol):
    """The queue as the other parts use it (queue.JobQueue)."""

    @property
    def sched(self) -> Scheduler: ...

    def pending(self) -> Set[int]: ...

    def enqueue(self, jobid: int) -> None: ...

    def dequeue(self, jobid: int) -> None: ...

    def mark_dirty(self) -> None: ...

    def kick(self) -> None: ...

    def schedule_soon(self) -> None: ...

    def take_drain_note(self, jobid: int) -> bool: ...

    def interrupted_by(self, reason: str) -> bool: ...

    def stop(self, reason: str) -> None: ...

    def resume(self) -> None: ...


class ExecutionsRole(Protocol):
    """The running jobs as the other parts use them (executions.Executions)."""

    def count(self) -> int: ...

    def running(self) -> list[int]: ...

    def is_running(self, jobid: int) -> bool: ...

    def holding(self) -> list[Holding]: ...

    def lines(self, jobid: int) -> list[OutputLine]: ...

    def start(self, record: JobRecord, allocation: Allocation) -> None: ...

    def requeue(self, record: JobRecord, kind: str, note: str) -> None: ...

    def exception(self, record: JobRecord, kind: str, note: str, severity: int = 0) -> None: ...

    def release(self, record: JobRecord) -> None: ...

    def adopt_orphan(self, jobid: int) -> None: ...


class WatchesRole(Protocol):
    """What the other parts tell the watches (watches.Watches)."""

    def submitted(self, record: JobRecord) -> None: ...

    def notify_output(self, jobid: int) -> None: ...

    def job_ended(self, record: JobRecord) -> None: ...

    def annotations_ended(self, record: JobRecord) -> None: ...


class InfoRole(Protocol):
    """A job's job-list view (queries.Queries.info), which answers to waits carry."""

    def info(self, record: JobRecord) -> JobInfoRecord: ...


class SaverRole(Protocol):
    """What completion asks the saver (saver.Saver): whether an exited job was checkpointing for a save."""

    def checkpointed(self, record: JobRecord) -> bool: ...
