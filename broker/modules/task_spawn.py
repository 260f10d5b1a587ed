"""Starting one task's process for job-exec: `os.posix_spawn` where it fits, `subprocess.Popen` otherwise.

Why: starting a trivial job's task cost the broker's loop about 0.4 ms of CPU with Popen (its Python-side
argument handling, encoding the environment one variable at a time, the error pipe, fork_exec), of 1.7 ms per
job in all, and 0.14 ms with posix_spawn, which does the same in C (glibc's clone with CLONE_VFORK); measured by
bench/bench_jobs_profile.py (issue 45). It fits the common case: the job runs as the broker's user, in the
broker's own working directory, with a command found on the job's PATH. Anything else (another user, another
directory, a command not found or not executable, descriptors 0-2 not where expected) takes Popen, which also
says exactly why a start failed (exec_launch.start_failure reads its exception).

What Popen did that posix_spawn must be told: stdin from /dev/null, stdout/stderr on the job's pipes, its own
process group, SIGPIPE and SIGXFSZ back to their defaults (Python ignores SIGPIPE and ignored signals survive
exec). Popen's close_fds has no counterpart: every descriptor the broker opens is close-on-exec (PEP 446;
libzmq's sockets and pidfds too), and those it inherited are made so when job-exec loads (seal_descriptors),
which tests/broker/test_task_spawn.py checks from inside a job.

The fast path is on unless the broker attribute `job-exec.posix-spawn` says 0/false. If posix_spawn itself is
broken (anything but an OSError from the exec), the task starts with Popen, one line says so, and the broker
uses Popen from then on: no job is lost to it.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from .spawn_cpu import SpawnHere

ATTRIBUTE = "job-exec.posix-spawn"
KEEP_FOUND = 1.0
"""Seconds a command's place on a PATH is remembered."""
MAX_FOUND = 256
RESET_SIGNALS = tuple(s for s in (signal.SIGPIPE, getattr(signal, "SIGXFSZ", None)) if s is not None)
"""What Popen's restore_signals resets in the child (Python sets SIGPIPE and SIGXFSZ to SIG_IGN)."""


@dataclass
class TaskProcess:
    """A started task: its pid, and the Popen object when Popen started it (it then owns the reaping)."""

    pid: int
    popen: subprocess.Popen[bytes] | None = None

    def reap(self) -> int:
        """Its wait(2) status once it has exited (blocks until then), as Flux's eventlog records it."""
        if self.popen is not None:
            code = self.popen.wait()
        else:
            _pid, status = os.waitpid(self.pid, 0)
            code = os.waitstatus_to_exitcode(status)
        return waitstatus(code)

    def settle(self, timeout: float) -> None:
        """Reap it if it exits within `timeout` seconds (at shutdown, after SIGKILL)."""
        if self.popen is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout=timeout)
            return
        deadline = time.monotonic() + timeout
        while True:
            try:
                pid, _status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                return
            if pid or time.monotonic() >= deadline:
                return
            time.sleep(0.01)


class TaskSpawner:
    """Starts tasks with their stdout and stderr on given pipe ends; OSError says why one could not start."""

    def __init__(self, fast: bool, log: Callable[[str], None], here: bool = False) -> None:
        self.fast = fast and hasattr(os, "posix_spawn")
        self._log = log
        self.here = SpawnHere(log) if here and self.fast and hasattr(os, "sched_setaffinity") else None
        self._programs = ProgramFinder()
        self._cwd = _cwd()  # the broker never changes directory: a getcwd per task was ~5 us of its start

    def spawn(
        self,
        command: list[str],
        env: Mapping[str, str],
        cwd: str | None,
        stdout: int,
        stderr: int,
        account: pwd.struct_passwd | None = None,
    ) -> TaskProcess:
        if self.fast and account is None and stdout > 2 and stderr > 2 and (not cwd or cwd == self._cwd):
            path = self._programs.find(command[0], env)
            if path is not None:
                started = self._posix_spawn(path, command, env, stdout, stderr)
                if started is not None:
                    return started
        proc = subprocess.Popen(
            command,
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            process_group=0,
            user=None if account is None else account.pw_uid,
            group=None if account is None else account.pw_gid,
            extra_groups=None if account is None else [],
        )
        return TaskProcess(proc.pid, proc)

    def _posix_spawn(
        self, path: str, command: list[str], env: Mapping[str, str], stdout: int, stderr: int
    ) -> TaskProcess | None:
        """The task started by posix_spawn; None when Popen should start it instead (and say why it fails)."""
        actions = [
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_DUP2, stdout, 1),
            (os.POSIX_SPAWN_DUP2, stderr, 2),
        ]
        here = self.here
        mask = pid = None
        try:
            mask = here.narrow() if here is not None else None  # the exec on this CPU (spawn_cpu.py)
            began = time.perf_counter()
            pid = os.posix_spawn(path, command, env, file_actions=actions, setpgroup=0, setsigdef=RESET_SIGNALS)
            if here is not None and mask is None:
                here.waited(time.perf_counter() - began)
        except OSError:
            self._programs.forget(command[0], env)  # gone or changed since it was found: looked up again
            return None  # the exec failed (not executable, not a binary): Popen tries and reports it as always
        except Exception as exc:  # a broken fast path: never a lost task
            self.fast = False
            self._log(f"posix_spawn failed ({exc!r}): starting tasks with subprocess.Popen from now on")
            return None
        finally:
            if mask is not None and here is not None:
                here.restore(mask, pid)
        return TaskProcess(pid)


class ProgramFinder:
    """Where exec finds a command on the job's PATH (as Popen searches it), or None if nowhere executable.

    A search stats each PATH directory in turn (twelve on a typical PATH before /usr/bin); 1,000 jobs of one
    command search once a second, as a shell's hash table remembers where a command was found, and a program
    put earlier on PATH is found within a second. A remembered place is not checked again before it is used:
    an exec that fails there forgets it (and Popen then searches and runs or reports as always)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, keep: float = KEEP_FOUND) -> None:
        self._clock = clock
        self._keep = keep
        self._found: dict[tuple[str | None, str], tuple[str, float]] = {}

    def find(self, name: str, env: Mapping[str, str]) -> str | None:
        if os.sep in name:
            return name
        key = (env.get("PATH"), name)
        now = self._clock()
        found = self._found.get(key)
        if found is not None and now < found[1]:
            return found[0]  # not checked again (an access(2) was 6 us a task): a failed exec forgets it (forget)
        for directory in os.get_exec_path(env):
            path = os.path.join(directory, name)
            if os.access(path, os.X_OK) and os.path.isfile(path):
                if len(self._found) >= MAX_FOUND:
                    self._found.clear()
                self._found[key] = (path, now + self._keep)
                return path
        return None

    def forget(self, name: str, env: Mapping[str, str]) -> None:
        """Its remembered place is wrong (the exec failed there): the next task of it searches PATH again."""
        self._found.pop((env.get("PATH"), name), None)


def seal_descriptors() -> list[int]:
    """Descriptors above 2 that the broker inherited open across exec become close-on-exec (which ones)."""
    sealed = []
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            if fd > 2 and os.get_inheritable(fd):
                os.set_inheritable(fd, False)
                sealed.append(fd)
        except OSError:  # listdir's own descriptor, closed by now
            continue
    return sealed


def _cwd() -> str | None:
    """Where the broker runs (a task asked to run elsewhere takes Popen: posix_spawn cannot change directory);
    None if that directory is gone (every task that names one takes Popen)."""
    try:
        return os.getcwd()
    except OSError:
        return None


def waitstatus(returncode: int) -> int:
    """A returncode (-signal or code, as Popen's) as a wait(2) status, as Flux's eventlog records it."""
    return -returncode if returncode < 0 else (returncode & 0xFF) << 8
