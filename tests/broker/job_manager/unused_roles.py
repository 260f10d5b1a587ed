"""The job manager's roles (broker/modules/job_manager/roles.py) with every member refusing: a test's fake part
subclasses one and overrides what the part under test asks of it, so the fake is the role to the type checker
and a call the test did not expect fails loudly instead of doing nothing."""

from __future__ import annotations

from collections.abc import Set
from typing import NoReturn

from broker.jobs.record import JobRecord
from broker.modules.job_manager.roles import Allocation, Holding, OutputLine
from broker.modules.scheduler import Scheduler


def _unexpected(what: str) -> NoReturn:
    raise AssertionError(f"the part under test was not expected to call {what}")


class UnusedQueue:
    """A QueueRole that answers nothing."""

    @property
    def sched(self) -> Scheduler:
        _unexpected("queue.sched")

    def pending(self) -> Set[int]:
        _unexpected("queue.pending")

    def enqueue(self, jobid: int) -> None:
        _unexpected("queue.enqueue")

    def dequeue(self, jobid: int) -> None:
        _unexpected("queue.dequeue")

    def mark_dirty(self) -> None:
        _unexpected("queue.mark_dirty")

    def kick(self) -> None:
        _unexpected("queue.kick")

    def schedule_soon(self) -> None:
        _unexpected("queue.schedule_soon")

    def take_drain_note(self, jobid: int) -> bool:
        _unexpected("queue.take_drain_note")

    def interrupted_by(self, reason: str) -> bool:
        _unexpected("queue.interrupted_by")

    def stop(self, reason: str) -> None:
        _unexpected("queue.stop")

    def resume(self) -> None:
        _unexpected("queue.resume")


class UnusedExecutions:
    """An ExecutionsRole that answers nothing."""

    def count(self) -> int:
        _unexpected("executions.count")

    def running(self) -> list[int]:
        _unexpected("executions.running")

    def is_running(self, jobid: int) -> bool:
        _unexpected("executions.is_running")

    def holding(self) -> list[Holding]:
        _unexpected("executions.holding")

    def lines(self, jobid: int) -> list[OutputLine]:
        _unexpected("executions.lines")

    def start(self, record: JobRecord, allocation: Allocation) -> None:
        _unexpected("executions.start")

    def requeue(self, record: JobRecord, kind: str, note: str) -> None:
        _unexpected("executions.requeue")

    def exception(self, record: JobRecord, kind: str, note: str, severity: int = 0) -> None:
        _unexpected("executions.exception")

    def release(self, record: JobRecord) -> None:
        _unexpected("executions.release")

    def adopt_orphan(self, jobid: int) -> None:
        _unexpected("executions.adopt_orphan")


class UnusedWatches:
    """A WatchesRole that hears nothing."""

    def submitted(self, record: JobRecord) -> None:
        _unexpected("watches.submitted")

    def notify_output(self, jobid: int) -> None:
        _unexpected("watches.notify_output")

    def job_ended(self, record: JobRecord) -> None:
        _unexpected("watches.job_ended")

    def annotations_ended(self, record: JobRecord) -> None:
        _unexpected("watches.annotations_ended")
