"""How `flux start --test-size` forks its brokers: libc's fork, without CPython's after-fork work, when that is safe.

`os.fork` runs in every child the interpreter's after-fork hooks: the threading module's `_after_fork` (its thread
objects, their locks, the weak set of dangling threads) and `random`'s reseeding. That work writes into objects the
child shares with the parent, so each broker copies their pages: measured at 256 brokers (issue 45), about 45
page faults and 0.2 MB of copied memory per broker, and 0.6 ms of CPU each for a bare fork. The hooks exist for
threads that were running at the fork, whose locks a child may inherit held; `flux start` forks from one thread,
so libc's fork (called with the GIL held, as os.fork holds it) is enough, and `random` is reseeded here if it was
imported. With other threads running, or without a libc fork to call, os.fork it is, and one line says why.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

Fork = Callable[[], int]


def _libc_fork() -> Fork | None:
    """libc's fork through ctypes (PyDLL: the GIL stays held across the call), or None where there is none."""
    try:
        import ctypes

        libc = ctypes.PyDLL(None, use_errno=True)
        raw = libc.fork
    except (ImportError, OSError, AttributeError):
        return None
    raw.restype = ctypes.c_int
    raw.argtypes = []

    def fork() -> int:
        pid = int(raw())
        if pid < 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))
        if pid == 0:
            _after_fork_in_child()
        return pid

    return fork


def _after_fork_in_child() -> None:
    """What a broker needs of the after-fork work os.fork would have done: its own random sequence."""
    rand = sys.modules.get("random")
    if rand is not None:
        rand.seed()


def running_threads(task_dir: str = "/proc/self/task") -> int:
    """Threads of this process now (the kernel's count; the threading module's where /proc is missing)."""
    try:
        return len(os.listdir(task_dir))
    except OSError:
        import threading

        return threading.active_count()


def choose_fork(threads: int | None = None, libc_fork: Callable[[], Fork | None] = _libc_fork) -> tuple[Fork, str]:
    """The fork to start brokers with and, when it is os.fork, why ('' for libc's)."""
    count = running_threads() if threads is None else threads
    if count > 1:
        return os.fork, f"{count} threads are running in this process"
    fork = libc_fork()
    if fork is None:
        return os.fork, "libc's fork cannot be called here"
    return fork, ""
