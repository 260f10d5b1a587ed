"""A task's exec on the broker's own CPU when plain spawns wait long: its thread's mask narrowed to that CPU around
posix_spawn, the child moved off that CPU after, and both given back the masks they had.

Why (issue 45): posix_spawn is vfork, so the broker's loop waits until the child has exec'd. The kernel puts a
new child on the least loaded CPU, which with the broker busy is the other one, where the last job's task or
another process runs; the broker's own CPU then idles while the child queues there. Measured on this 2-core
machine with `--cc=1-1000 --wait true`: 0.24 ms a spawn on a quiet machine, 0.7-1.3 ms at load 3, most of the
loop's wall time then. A child made while the broker's thread may run only on the CPU it runs on inherits that,
so it execs there the moment the broker blocks (0.2-0.3 ms a spawn at load 3); it is then moved to the other
CPUs, or the broker and it would share this one for the task's whole life. On a quiet machine this costs more
than it saves (every task lands on the other CPU, crowding it, and the mask calls cost ~30 us a task), so it is
used only while plain spawns wait longer than LONG_WAIT on average, every PROBE-th spawn plain to keep measuring.

The child must not keep a narrowed mask: the broker gives it the mask the broker's thread had, the moment
posix_spawn returns, which is when the child has just replaced its image (the kernel wakes a vfork parent then),
long before a program is far enough to start threads of its own. Only the thread's mask changes
(sched_setaffinity(0) is per thread), and a job bound to its cores (cpu_affinity.forked_on) gets its own mask.

Off by default (`job-exec.spawn-here=on` turns it on). The child runs with the one-CPU mask from its exec until
the broker gives it back, and on a loaded machine the broker may be preempted in between: a program that reads its
mask as it starts (an OpenMP runtime, hwloc, an MPI rank binding itself) would size itself for one CPU. Measured
in the same hour, 12 alternating pairs of `--cc=1-1000 --wait` at load 2: 1.18 s on against 1.15 s off; the gain
the first measure showed (1.10x under nice'd load) did not hold. If the CPU cannot be read (no ctypes) or a mask
cannot be set, one line says so and tasks start as before.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable

ATTRIBUTE = "job-exec.spawn-here"
DEFAULT = False
LONG_WAIT = 0.0005
"""A plain spawn's average wait (seconds) above which spawning here pays: on a quiet machine plain spawns wait
0.24 ms and spawning here cost 0.13 ms a job (every task moved to the other CPU, crowding it: 1,000 jobs in 1.02 s
against 0.89); at load 3 they waited 0.7-1.3 ms and spawning here saved 0.3-0.6 ms a job."""
PROBE = 8
WEIGHT = 0.125


class SpawnHere:
    """`narrow()` before posix_spawn (the mask to put back and the CPU, or None: a plain spawn, whose wait is then
    given to `waited`), `restore(narrowed, pid)` after."""

    def __init__(self, log: Callable[[str], None]) -> None:
        self._log = log
        self._getcpu: Callable[[], int] | None = None
        self.on = True
        self.wait = 0.0
        """Seconds a plain spawn waits for its child's exec, a moving average (WEIGHT) over the measured ones."""
        self._count = 0

    def narrow(self) -> tuple[set[int], int] | None:
        """This thread held to the CPU it runs on; its mask before and that CPU (None: nothing changed). Only
        while plain spawns wait long (LONG_WAIT); every PROBE-th spawn is plain, to see whether they still do."""
        self._count += 1
        if not self.on or self.wait < LONG_WAIT or self._count % PROBE == 0:
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

    def waited(self, seconds: float) -> None:
        """A plain spawn's wait for its child's exec."""
        self.wait += (seconds - self.wait) * WEIGHT

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
