"""Job directories removed off the broker's loop: one thread, in order, drained when the broker closes.

Why: removing a job's FLUX_JOB_TMPDIR is a directory scan and an rmdir, 0.1-0.3 ms on this ext4 (mounted with
`discard`), paid by the loop thread for every job, in the middle of a stream of 1,000 short jobs (issue 27's
throughput target). A removal only has to happen after the job's tasks are gone and before the broker exits;
nothing reads the directory in between (job-exec renames it first, so the job may run again at once), and a
broker killed with removals queued leaves those directories in its rundir, as it leaves a running job's.
"""

from __future__ import annotations

import queue
import shutil
import threading
from collections.abc import Callable

Removal = Callable[[str], None]


class DirRemover:
    """`remove(path)` returns at once; `close()` waits until everything handed over is gone."""

    def __init__(self, removal: Removal = lambda path: shutil.rmtree(path, ignore_errors=True)) -> None:
        self._removal = removal
        self._queue: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        """Started by the first removal: a broker that never runs a job (most of a 2,048-broker test instance)
        pays for no thread, no stack and no malloc arena of its own."""

    @property
    def started(self) -> bool:
        return self._thread is not None

    def remove(self, path: str) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="job-dir-remover", daemon=True)
            self._thread.start()
        self._queue.put(path)

    def close(self, timeout: float = 30.0) -> None:
        if self._thread is None:
            return
        self._queue.put(None)
        self._thread.join(timeout)

    def _run(self) -> None:
        while (path := self._queue.get()) is not None:
            try:
                self._removal(path)
            except Exception:  # one directory's failure must not stop the others' removal
                continue
