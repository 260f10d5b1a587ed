"""A controller's lock file: held with flock for the process's life, with its pid inside for whoever asks.

The autoscaler and the multiplexing controller each run once per cluster on this machine; the lock refuses a
second one (naming the first's pid) and tells `minicluster down` whom to stop. The kernel drops the lock when
the process dies, so a crash never leaves a cluster locked; a controller that ends deletes its lock file, and
`down` deletes one a killed controller left (miniclusters/lockfile.py makes deleting a lock file safe).

A controller `up` starts in the background holds its lock before `up` names its pid: `spawn_holding` takes the lock
in `up`, starts the child with the locked descriptor (a flock belongs to the open file, so the child holds it from
its first instruction), and writes the child's pid in it. The child's `exclusive` adopts that descriptor. Before,
the child took the lock itself once started (after its imports and a first look at the cluster), and a second
`minicluster autoscale` started in between took it first: two loops announced, the one named was refused.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from miniclusters import lockfile
from miniclusters.backends.base import BackendError


class AlreadyRunning(BackendError):
    """Another process holds the lock; the message names its pid and the lock file."""


def _pid_in(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


HANDED = "MINICLUSTERS_HANDED_LOCK"
"""`<descriptor>:<path>` of a lock a child was started holding (`spawn_holding`), for its `exclusive` to adopt."""
GRACE = 0.5
"""How long a taker waits before it says the lock is held: `holder()` (status, down) holds it for a moment to look."""


def _write_pid(handle: int, pid: int) -> None:
    os.ftruncate(handle, 0)
    os.pwrite(handle, str(pid).encode(), 0)


def _handed(path: Path) -> int | None:
    """The descriptor of `path`'s lock our parent started us holding, or None (taken from the environment once)."""
    fd = os.environ.get(HANDED, "").partition(":")[0]
    if not fd.isdigit():
        return None
    try:  # the same file, however its name was spelled
        mine, there = os.fstat(int(fd)), os.stat(path)
    except OSError:
        return None
    if (mine.st_dev, mine.st_ino) != (there.st_dev, there.st_ino):
        return None
    del os.environ[HANDED]  # ours alone, not our children's
    return int(fd)


@contextlib.contextmanager
def exclusive(path: Path, what: str) -> Iterator[Path]:
    """Hold `path` (our pid written in it) or raise AlreadyRunning: "<what> by pid N (lock PATH)".

    A process started by `spawn_holding` already holds it and keeps it."""
    handle = _handed(path)
    if handle is None:
        try:
            handle = lockfile.take(path, timeout=GRACE)
        except lockfile.LockBusy:
            raise AlreadyRunning(f"{what} by pid {_pid_in(path) or '?'} (lock {path})") from None
    try:
        _write_pid(handle, os.getpid())
        yield path
    finally:
        lockfile.remove_held(path)
        lockfile.release(handle)


def spawn_holding(
    path: Path, what: str, argv: Sequence[str], prepare: Callable[[], object] = lambda: None, **popen: Any
) -> subprocess.Popen[bytes]:
    """Start `argv` holding the lock `path` (its pid in it) before returning, or raise AlreadyRunning.

    The lock is taken here and handed to the child as an inherited descriptor, so there is no moment in which the
    child is announced but does not hold it. The child's `exclusive(path, ...)` adopts it. `prepare` runs holding
    the lock, before the child starts (clearing what a previous holder left; refused, nothing is cleared)."""
    try:
        handle = lockfile.take(path, timeout=GRACE)
    except lockfile.LockBusy:
        raise AlreadyRunning(f"{what} by pid {_pid_in(path) or '?'} (lock {path})") from None
    try:
        os.ftruncate(handle, 0)  # not a previous holder's pid while the child starts
        prepare()
        env = dict(popen.pop("env", None) or os.environ)
        env[HANDED] = f"{handle}:{path}"
        child = subprocess.Popen(list(argv), pass_fds=(handle,), env=env, **popen)
    except BaseException:
        lockfile.release(handle)
        raise
    try:
        _write_pid(handle, child.pid)
    finally:
        os.close(handle)  # not unlocked: the child holds the same open file from here on
    return child


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
