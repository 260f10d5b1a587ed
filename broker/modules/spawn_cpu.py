"""A task's exec on the broker's own CPU: its mask narrowed to that CPU around posix_spawn, both put back after.

Why (issue 45): posix_spawn is vfork, so the broker's loop waits until the child has exec'd. The kernel places
a new child on the least loaded CPU when it is made, which with the broker busy is the other one, where the last
job's task or another process runs; the broker's own CPU then idles while the child queues there. Measured on
this 2-core machine, with `--cc=1-1000 --wait true`: 0.27-0.39 ms a spawn on a quiet machine and 1.1-1.4 ms at
load 2, most of the loop's wall time. A child made while the broker's thread may run only on the CPU it runs on
inherits that, so it starts there the moment the broker blocks: 0.26 ms a spawn at load 2 in the same test.

The child must not keep the narrowed mask: the broker gives it (and itself) the mask it had the moment
posix_spawn returns, which is when the child has just replaced its image (the kernel wakes a vfork parent
then), long before a program is far enough to start threads of its own. Only the thread's mask changes
(sched_setaffinity(0) is per thread), and a job bound to its cores (cpu_affinity.forked_on) gets its own mask
back, not the broker's.

On by default; the broker attribute `job-exec.spawn-here` (on/off) turns it off. If the CPU cannot be read
(no ctypes) or a mask cannot be set, one line says so and tasks start as before.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable

ATTRIBUTE = "job-exec.spawn-here"


class SpawnHere:
    """`narrow()` before posix_spawn (the mask to put back, or None), `restore(mask, pid)` after."""

    def __init__(self, log: Callable[[str], None]) -> None:
        self._log = log
        self._getcpu: Callable[[], int] | None = None
        self.on = True

    def narrow(self) -> tuple[set[int], int] | None:
        """This thread held to the CPU it runs on; its mask before and that CPU (None: nothing changed)."""
        if not self.on:
            return None
        try:
            getcpu = self._getcpu or self._load()
            mask = os.sched_getaffinity(0)
            cpu = getcpu()
            if len(mask) < 2 or cpu not in mask:
                return None
            os.sched_setaffinity(0, (cpu,))
        except Exception as exc:  # a broken fast path: tasks start as before
            self._off(exc)
            return None
        return mask, cpu

    def restore(self, narrowed: tuple[set[int], int], pid: int | None) -> None:
        """This thread's mask put back; the child (if it started) moved off this CPU, then given the same mask."""
        mask, cpu = narrowed
        try:
            os.sched_setaffinity(0, mask)
        except Exception as exc:  # said once (the thread stays on one CPU: slower, nothing lost)
            self._off(exc)
        if pid is None:
            return
        try:
            with contextlib.suppress(ProcessLookupError):  # already gone: nothing left to place
                os.sched_setaffinity(pid, mask - {cpu})
                os.sched_setaffinity(pid, mask)
        except Exception as exc:
            self._off(exc)

    def _load(self) -> Callable[[], int]:
        import ctypes  # loaded with the first task: an idle broker never pays for it

        function = ctypes.PyDLL(None).sched_getcpu  # PyDLL: no GIL hand-off for a vDSO call
        function.restype = ctypes.c_int
        function.argtypes = []
        self._getcpu = function
        return function

    def _off(self, exc: Exception) -> None:
        if self.on:
            self.on = False
            self._log(f"{ATTRIBUTE}: cannot start tasks on the broker's CPU ({exc!r}): started as before from now on")
