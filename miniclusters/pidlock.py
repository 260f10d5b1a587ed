"""A controller's lock file: held with flock for the process's life, with its pid inside for whoever asks.

The autoscaler and the multiplexing controller each run once per cluster on this machine; the lock refuses a
second one (naming the first's pid) and tells `minicluster down` whom to stop. The kernel drops the lock when
the process dies, so a crash never leaves a cluster locked.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from miniclusters.backends.base import BackendError


class AlreadyRunning(BackendError):
    """Another process holds the lock; the message names its pid and the lock file."""


@contextlib.contextmanager
def exclusive(path: Path, what: str) -> Iterator[Path]:
    """Hold `path` (our pid written in it) or raise AlreadyRunning: "<what> by pid N (lock PATH)"."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "?"
            raise AlreadyRunning(f"{what} by pid {holder} (lock {path})") from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        yield path
