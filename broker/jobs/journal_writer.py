"""The journal's fsync off the broker's loop: one writer thread, group commit, completion back on the loop.

Why: an fsync takes milliseconds (4 ms median here, far more when the disk is shared), and while the broker's
one loop thread waited in it, nothing else was answered: a read of a job (`job-manager.info`) arriving during
a stream of submits waited for the fsync in progress, which is most of what made the REST server's GET slower
during submits (issue 30; measured with bench/bench_rest.py). Here the loop hands a batch to this thread and
goes on answering; the batch's acknowledgements are sent only when its `done` runs, back on the loop, after
the write and fsync returned. So the journal's guarantee is unchanged: an accepted job is on disk before it is
acknowledged. Batches are written one at a time, in order; while one is on its way to disk the job manager
gathers the next (group commit: concurrent submits share an fsync).

The text is encoded on the loop thread (the events' contexts belong to the loop); the thread only writes.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Protocol

from broker.jobs.journal import JobEvent, Journal


class ReaderLoop(Protocol):
    """What the writer needs from the broker's loop (broker/loop.py): a callback when a descriptor is readable."""

    def add_reader(self, source: object, callback: Callable[[], None]) -> None: ...
    def remove_reader(self, source: object) -> None: ...


class JournalWriter:
    """At most one batch in flight; `busy` while it is. `done` runs on the loop (or raises the write's error)."""

    def __init__(self, journal: Journal, loop: ReaderLoop) -> None:
        self.journal = journal
        self.loop = loop
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_read, False)
        loop.add_reader(self._wake_read, self._on_written)
        self._lock = threading.Lock()
        self._work = threading.Condition(self._lock)
        self._batch: str | None = None  # waiting for the thread
        self._done: Callable[[], None] | None = None
        self._finished: tuple[Callable[[], None], BaseException | None] | None = None
        self._closing = False
        self.busy = False
        self._thread = threading.Thread(target=self._run, name="journal-writer", daemon=True)
        self._thread.start()

    def append(self, events: list[JobEvent], done: Callable[[], None]) -> None:
        """Write `events` and fsync them on the writer thread; then run `done` on the loop. Not while busy."""
        if self.busy:
            raise RuntimeError("journal writer: a batch is already in flight")
        text = JobEvent.lines(events)
        with self._work:
            self.busy = True
            self._batch, self._done = text, done
            self._work.notify()

    def _run(self) -> None:
        while True:
            with self._work:
                while self._batch is None and not self._closing:
                    self._work.wait()
                if self._batch is None:
                    return
                text, done = self._batch, self._done
            error: BaseException | None = None
            try:
                self.journal.append_text(text)
            except BaseException as exc:  # handed to the loop, which fails as a synchronous write would
                error = exc
            with self._work:
                self._batch, self._done = None, None
                assert done is not None
                self._finished = (done, error)
                self._work.notify_all()
            os.write(self._wake_write, b"x")

    def _on_written(self) -> None:
        try:
            os.read(self._wake_read, 512)
        except BlockingIOError:
            return
        with self._work:
            finished, self._finished = self._finished, None
        if finished is None:
            return
        self.busy = False
        done, error = finished
        if error is not None:
            raise error
        done()

    def drain(self) -> None:
        """Wait for the batch in flight to reach the disk (at shutdown; its `done` does not run)."""
        with self._work:
            while self._batch is not None:
                self._work.wait()

    def close(self) -> None:
        self.drain()
        with self._work:
            self._closing = True
            self._work.notify_all()
        self._thread.join(timeout=30)
        self.loop.remove_reader(self._wake_read)
        os.close(self._wake_read)
        os.close(self._wake_write)
