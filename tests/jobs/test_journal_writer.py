"""The journal's fsync off the broker's loop (broker/jobs/journal_writer.py): the loop keeps serving while a
batch is on its way to disk, and a batch's `done` (where the job manager acknowledges submits) runs only once
the batch is written and fsync'd, in order, on the loop's thread."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from broker.jobs.journal import JobEvent, Journal, JournalError
from broker.jobs.journal_writer import JournalWriter
from broker.loop import Loop


class HeldJournal(Journal):
    """A journal whose writes wait at a gate (a slow disk), recording what was on disk when each returned."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.gate = threading.Event()
        self.writing = threading.Event()
        self.threads: list[str] = []

    def append_text(self, text: str) -> None:
        self.threads.append(threading.current_thread().name)
        self.writing.set()
        assert self.gate.wait(10), "the test never let the write go"
        super().append_text(text)


def _event(jobid: int) -> JobEvent:
    return JobEvent(jobid, "submit", 1.0, {"userid": 0})


def test_the_loop_serves_while_a_batch_is_written_and_done_runs_after_the_fsync(tmp_path: Path) -> None:
    journal = HeldJournal(tmp_path / "journal.jsonl")
    loop = Loop()
    writer = JournalWriter(journal, loop)
    seen: list[str] = []
    on_disk_when_done: list[list[int]] = []

    def done() -> None:
        on_disk_when_done.append([e.jobid for e in Journal(journal.path).events()])
        seen.append(f"done on {threading.current_thread().name}")
        loop.stop()

    def meanwhile() -> None:  # the loop is free while the write waits on the (slow) disk
        assert journal.writing.is_set() and writer.busy
        seen.append("timer ran while writing")
        journal.gate.set()

    writer.append([_event(1), _event(2)], done)
    assert writer.busy
    with pytest.raises(RuntimeError, match="already in flight"):
        writer.append([_event(3)], done)  # one batch at a time: the next gathers meanwhile
    loop.call_later(0.05, meanwhile)
    loop.call_later(10, loop.stop)  # a failing test ends rather than hangs
    loop.run()
    assert seen == ["timer ran while writing", f"done on {threading.current_thread().name}"]
    assert on_disk_when_done == [[1, 2]]  # done ran once both lines were on disk
    assert journal.threads == ["journal-writer"] and not writer.busy
    writer.close()
    journal.close()


def test_batches_land_in_order_and_close_waits_for_the_one_in_flight(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "journal.jsonl")
    loop = Loop()
    writer = JournalWriter(journal, loop)
    landed: list[int] = []

    def batch(first: int) -> None:
        def done() -> None:
            landed.append(first)
            if first < 30:
                batch(first + 10)
            else:
                loop.stop()

        writer.append([_event(first + i) for i in range(10)], done)

    batch(0)
    loop.call_later(10, loop.stop)
    loop.run()
    assert landed == [0, 10, 20, 30]
    assert [e.jobid for e in Journal(journal.path).events()] == list(range(40))
    writer.append([_event(99)], lambda: None)  # in flight at shutdown: close waits for it to reach the disk
    writer.close()
    assert [e.jobid for e in Journal(journal.path).events()][-1] == 99
    journal.close()


def test_a_failed_write_fails_on_the_loop_and_acknowledges_nothing(tmp_path: Path) -> None:
    class Broken(Journal):
        def append_text(self, text: str) -> None:
            raise JournalError(f"{self.path}: cannot append: No space left on device")

    journal = Broken(tmp_path / "journal.jsonl")
    loop = Loop()
    writer = JournalWriter(journal, loop)
    acknowledged: list[bool] = []
    writer.append([_event(1)], lambda: acknowledged.append(True))
    loop.call_later(10, loop.stop)
    with pytest.raises(JournalError, match="No space left"):
        loop.run()  # as a synchronous write on the loop failed: the broker stops, nothing acknowledged
    assert not acknowledged
    writer.close()
    journal.close()
