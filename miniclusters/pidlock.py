"""A controller's lock file: held with flock for the process's life, with its pid inside for whoever asks.

The autoscaler and the multiplexing controller each run once per cluster on this machine; the lock refuses a
second one (naming the first's pid) and tells `minicluster down` whom to stop. The kernel drops the lock when
the process dies, so a crash never leaves a cluster locked; a controller that ends deletes its lock file, and
`down` deletes one a killed controller left (miniclusters/lockfile.py makes deleting a lock file safe).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

from miniclusters import lockfile
from miniclusters.backends.base import BackendError


class AlreadyRunning(BackendError):
    """Another process holds the lock; the message names its pid and the lock file."""


def _pid_in(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


@contextlib.contextmanager
def exclusive(path: Path, what: str) -> Iterator[Path]:
    """Hold `path` (our pid written in it) or raise AlreadyRunning: "<what> by pid N (lock PATH)"."""
    try:
        with lockfile.locked(path, timeout=0) as handle:
            os.ftruncate(handle, 0)
            os.pwrite(handle, str(os.getpid()).encode(), 0)
            try:
                yield path
            finally:
                lockfile.remove_held(path)
    except lockfile.LockBusy:
        raise AlreadyRunning(f"{what} by pid {_pid_in(path) or '?'} (lock {path})") from None


def holder(path: Path) -> int | None:
    """The pid of the process holding the lock file, None when nobody does."""
    if not path.is_file():
        return None
    try:
        with lockfile.locked(path, timeout=0):
            return None
    except lockfile.LockBusy:
        text = _pid_in(path)
        return int(text) if text.isdigit() else None


def stop_holder(path: Path, timeout: float = 15.0) -> int | None:
    """SIGTERM the lock's holder and wait until it lets go (SIGKILL after `timeout`); then delete the lock file if
    it is left. Returns the pid stopped, or None when nobody held it."""
    pid = holder(path)
    if pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while holder(path) == pid:
            if time.monotonic() > deadline:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                deadline = time.monotonic() + 5.0  # the kernel lets go of its lock as it dies
            time.sleep(0.1)
    lockfile.remove_if_free(path)
    return pid
