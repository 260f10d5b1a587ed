"""Lock files that may be removed: `down` leaves no lock file behind (issue 24), so whoever holds one may delete it.

flock locks an open file, not a name. Had one process deleted the file while another waited on it, the waiter would
lock a file nobody else can find, while a third locked a new one of the same name: two holders. So after flock
succeeds, a taker checks that the name still leads to the file it locked, and opens it again when it does not.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

from miniclusters.errors import MiniclustersError


class LockBusy(MiniclustersError):
    """The lock is held by another process (a non-blocking take, or the timeout passed)."""


def _still_named(handle: int, path: Path) -> bool:
    try:
        named = os.stat(path)
    except FileNotFoundError:
        return False
    mine = os.fstat(handle)
    return (named.st_dev, named.st_ino) == (mine.st_dev, mine.st_ino)


def _take(handle: int, deadline: float | None) -> None:
    """flock(LOCK_EX) on `handle`; None waits forever, a deadline in the past tries once."""
    if deadline is None:
        fcntl.flock(handle, fcntl.LOCK_EX)
        return
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise LockBusy(str(handle)) from None
            time.sleep(0.05)


def take(path: Path, timeout: float | None = None, mode: int = 0o644, dir_mode: int = 0o777) -> int:
    """Open and flock the lock file `path` (created if missing, with its directory); the descriptor, which the
    caller gives back with `release` (or hands to a child: the lock belongs to the open file, not the process).
    LockBusy after `timeout` seconds (0: do not wait; None: wait forever)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        path.parent.mkdir(parents=True, exist_ok=True, mode=dir_mode)
        try:
            handle = os.open(path, os.O_RDWR | os.O_CREAT, mode)
        except FileNotFoundError:  # its directory was removed just now (the last holder left): make it again
            continue
        try:
            _take(handle, deadline)
        except BaseException:
            os.close(handle)
            raise
        if _still_named(handle, path):
            return handle
        os.close(handle)  # removed (and perhaps made anew) while we waited: take that one


def release(handle: int) -> None:
    """Unlock and close a descriptor from `take`."""
    try:
        fcntl.flock(handle, fcntl.LOCK_UN)
    finally:
        os.close(handle)


@contextlib.contextmanager
def locked(path: Path, timeout: float | None = None, mode: int = 0o644, dir_mode: int = 0o777) -> Iterator[int]:
    """Hold the lock file `path` (created if missing, with its directory) and yield its descriptor; LockBusy after
    `timeout` seconds (0: do not wait; None: wait forever)."""
    handle = take(path, timeout, mode, dir_mode)
    try:
        yield handle
    finally:
        release(handle)


def remove_held(path: Path) -> None:
    """Delete the lock file the caller holds (the next taker sees it gone and makes a new one)."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def remove_if_free(path: Path) -> bool:
    """Delete a lock file nobody holds (one a killed process left); False when it is held or absent."""
    if not path.exists():
        return False
    try:
        with locked(path, timeout=0):
            remove_held(path)
            return True
    except LockBusy:
        return False
