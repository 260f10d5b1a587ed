"""Lock files that `down` deletes (issue 24) stay mutual exclusion: one deleted while another process waits on it is
taken anew by the waiter, never held as a nameless file beside a new one."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from pathlib import Path

from miniclusters import lockfile, pidlock
from tests.waiting import wait_until

HOLD = (
    "import fcntl, sys, time; f = open(sys.argv[1], 'a+'); fcntl.flock(f, fcntl.LOCK_EX); "
    "print('held', flush=True); time.sleep(30)"
)


def _descriptors_of(path: Path) -> int:
    """How many of this process's open descriptors name `path`."""
    named = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # closed meanwhile
            named += os.readlink(f"/proc/self/fd/{fd}") == str(path)
    return named


def test_a_lock_file_deleted_while_waited_on_is_taken_anew(tmp_path: Path) -> None:
    path = tmp_path / "store" / ".lock"
    seen: list[bool] = []

    def wait_for_it() -> None:
        with lockfile.locked(path, timeout=10) as handle:
            mine, named = os.fstat(handle), os.stat(path)
            seen.append((mine.st_dev, mine.st_ino) == (named.st_dev, named.st_ino))

    with lockfile.locked(path):
        waiter = threading.Thread(target=wait_for_it)
        waiter.start()
        # the waiter has opened the file (and waits in flock): two descriptors of this process name it
        wait_until("the waiter opens the lock file", lambda: _descriptors_of(path) >= 2, timeout=10)
        lockfile.remove_held(path)
        path.parent.rmdir()  # the last holder also removes an empty directory of ours
    waiter.join(timeout=15)
    assert seen == [True]


def test_only_a_lock_file_nobody_holds_is_removed(tmp_path: Path) -> None:
    path = tmp_path / "c.lock"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert not lockfile.remove_if_free(path) and path.exists()
    finally:
        holder.kill()
        holder.wait()
    assert lockfile.remove_if_free(path) and not path.exists()


def test_a_controller_s_lock_file_goes_with_it(tmp_path: Path) -> None:
    path = tmp_path / ".autoscaler" / "c.lock"
    with pidlock.exclusive(path, "c is autoscaled"):
        assert path.read_text() == str(os.getpid()) and pidlock.holder(path) == os.getpid()
    assert not path.exists()
