"""Every process a job started, however deep, found again by a tag in its environment.

A job's tasks run in their own process groups, but a nested instance (a `flux batch` inside a `flux batch`)
starts its own tasks in new groups, and when a broker in the middle dies its children are re-parented to
init: neither the process group nor the parent chain still leads to them. The environment does: each task
gets MC_JOB_TREE, a space-separated list of tags, one per enclosing job (`<rank key>.<jobid>`), which every
descendant inherits (/proc/PID/environ shows the environment a process was started with). Killing a job
kills every process carrying its tag, and a broker restarting on the same rundir kills what its previous
incarnation left running.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from _blake2 import blake2b  # hashlib's own blake2b, without hashlib's OpenSSL (about 3 MB)
from collections.abc import Iterator, Mapping

TREE_VARIABLE = "MC_JOB_TREE"
JOB_TMP = "jobtmp"  # <rundir>/jobtmp/<job>: each job's tmpdir, made before any of its tasks starts
SWEEP_ROUNDS = 20  # a process that forks while we sweep is caught in the next round


def rank_key(rundir: str, rank: int) -> str:
    """Stable across restarts of one rank (same rundir), distinct between instances and ranks on one machine."""
    return blake2b(f"{os.path.realpath(rundir)}:{rank}".encode(), digest_size=6).hexdigest()


def job_tag(key: str, jobid: int) -> str:
    return f"{key}.{jobid}"


def tree_value(own_environment: Mapping[str, str], tag: str) -> str:
    """A job's MC_JOB_TREE: the tags of the jobs this broker itself runs inside of, plus the job's own.

    Whatever the submitter's environment carried is replaced: a job that submits another job to its own
    instance must not have that job killed with it.
    """
    return " ".join([*own_environment.get(TREE_VARIABLE, "").split(), tag])


def _tags_of(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            data = handle.read()
    except OSError:
        return []  # gone, or another user's process we may not read
    marker = TREE_VARIABLE.encode() + b"="
    for entry in data.split(b"\0"):
        if entry.startswith(marker):
            return entry[len(marker) :].decode(errors="replace").split()
    return []


def tagged(match: str, prefix: bool = False) -> Iterator[int]:
    """Pids of processes carrying tag `match` (or any tag starting with it)."""
    me = os.getpid()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        tags = _tags_of(int(name))
        if any(t.startswith(match) if prefix else t == match for t in tags):
            yield int(name)


def sweep(match: str, prefix: bool = False) -> int:
    """SIGKILL every process carrying the tag, round after round until none is left; returns how many."""
    killed: set[int] = set()
    for _ in range(SWEEP_ROUNDS):
        found = set(tagged(match, prefix))
        if not found:
            break
        if found <= killed:
            time.sleep(0.01)  # killed already, not yet gone from /proc
        for pid in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        killed |= found
    return len(killed)
