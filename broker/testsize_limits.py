"""What `flux start --test-size=N` needs of this machine's limits, checked before the first broker is forked.

Each broker is a process of 3 threads (its loop, zmq's I/O thread and zmq's reaper), so 2,048 brokers are about
6,200 kernel tasks: more than a non-root user's `ulimit -u` often allows, and near kernel.pid_max on small
machines (32,768 here, which 16,384 brokers would pass). A broker holds about 20 file descriptors, but a parent
takes one more per child, so a flat tree (-Stbon.fanout=0) puts N on rank 0. Soft limits are raised in-process up
to the hard ones; what cannot be raised is said before anything starts, naming the limit and how to change it.
"""

from __future__ import annotations

import os
import resource
from pathlib import Path

from .errors import BrokerFailure

THREADS_PER_BROKER = 3
FDS_SPARE = 256  # what a broker needs besides one per child: sockets, pipes, its zmq context, a job's pipes


class LimitError(BrokerFailure):
    """A limit the instance would pass that this process cannot raise; the message says which and how."""


def _read_int(path: str) -> int | None:
    try:
        return int(Path(path).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def tasks_in_use(loadavg: str = "/proc/loadavg") -> int:
    """Kernel tasks (threads) on the machine now: the denominator of /proc/loadavg's fourth field."""
    try:
        return int(Path(loadavg).read_text().split()[3].split("/")[1])
    except (OSError, ValueError, IndexError):
        return 0


def _raise_soft(limit: int, wanted: int) -> int:
    """Raise the soft limit toward `wanted` as far as the hard limit lets; return the soft limit now."""
    soft, hard = resource.getrlimit(limit)
    if soft == resource.RLIM_INFINITY or soft >= wanted:
        return wanted
    soft = wanted if hard == resource.RLIM_INFINITY else min(hard, wanted)
    resource.setrlimit(limit, (soft, hard))
    return soft


def prepare_limits(
    size: int, proc: str = "/proc/sys/kernel", loadavg: str = "/proc/loadavg", is_root: bool | None = None
) -> None:
    """Raise the soft limits `size` brokers need; LimitError when the machine cannot hold them."""
    tasks = size * THREADS_PER_BROKER
    kernel = [
        (value, name)
        for value, name in (
            (_read_int(f"{proc}/pid_max"), "kernel.pid_max"),
            (_read_int(f"{proc}/threads-max"), "kernel.threads-max"),
        )
        if value is not None
    ]
    in_use = tasks_in_use(loadavg)
    for value, name in kernel:
        if in_use + tasks > value:
            raise LimitError(
                f"needs about {tasks:,} threads ({THREADS_PER_BROKER} per broker) besides the {in_use:,} running, "
                f"but {name} is {value:,} (raise it: sysctl -w {name}={in_use + tasks + 1024})"
            )
    if not (os.geteuid() == 0 if is_root is None else is_root):  # root is not held to RLIMIT_NPROC
        allowed = _raise_soft(resource.RLIMIT_NPROC, in_use + tasks)
        if allowed < tasks:
            raise LimitError(
                f"needs about {tasks:,} processes and threads ({THREADS_PER_BROKER} per broker) but this user may "
                f"have {allowed:,} (ulimit -u; the hard limit is set by the administrator)"
            )
    _raise_soft(resource.RLIMIT_NOFILE, size + FDS_SPARE)  # as far as it goes: only a flat tree needs it all
