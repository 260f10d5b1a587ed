"""One multiplexing controller per cluster on this machine: its lock, and starting/stopping it for `up`/`down`.

`minicluster up` of a spec with `multiplexing.enabled` starts `minicluster multiplex NAME` detached; the lock
file (`<state>/.multiplexer/<name>.lock`, holding the pid) refuses a second controller of the same pods, whether
started by `up` or by hand, and tells `minicluster down` whom to stop. Its event log, timeline PNG and output
live beside the lock.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from pathlib import Path

from miniclusters import pidlock
from miniclusters.workdirs import state_root


def multiplexer_dir() -> Path:
    return state_root() / ".multiplexer"  # not a cluster name (names cannot start with a dot)


def lock_path(name: str) -> Path:
    return multiplexer_dir() / f"{name}.lock"


def _already(name: str) -> str:
    return f"MiniCluster {name!r} is already multiplexed"


def exclusive(name: str) -> contextlib.AbstractContextManager[Path]:
    """Hold the cluster's lock (our pid in it) or raise AlreadyRunning naming the holder."""
    return pidlock.exclusive(lock_path(name), _already(name))


def holder(name: str) -> int | None:
    """The pid of the controller holding the cluster's lock, None when none does."""
    return pidlock.holder(lock_path(name))


def background_files(name: str) -> tuple[Path, Path, Path]:
    """(event log, timeline PNG, output) of the controller `up` starts."""
    folder = multiplexer_dir()
    return folder / f"{name}.jsonl", folder / f"{name}.png", folder / f"{name}.log"


def start_in_background(name: str, backend: str) -> tuple[int, Path, Path]:
    """Start `minicluster multiplex NAME` (spec.multiplexing gives its settings) in its own session, holding the
    cluster's lock before this returns (AlreadyRunning when another controller holds it).

    Returns (pid, event log, timeline PNG). It ends when its simulations are done, at `minicluster down`, or when
    the cluster is gone.
    """
    from miniclusters.multiplex.state_file import state_file

    events, png, output = background_files(name)
    output.parent.mkdir(parents=True, exist_ok=True)
    program = Path(sys.executable).with_name("minicluster")
    argv = [str(program), "multiplex", name, "--backend", backend, "--timeline", str(png), "--started-by", "up"]
    with open(output, "ab") as out:
        child = pidlock.spawn_holding(
            lock_path(name), _already(name), argv,
            prepare=lambda: state_file(backend, name).unlink(missing_ok=True),  # a previous cluster's controller's
            stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True,
        )  # fmt: skip
    return child.pid, events, png


def stop(name: str, timeout: float = 15.0) -> int | None:
    """SIGTERM the cluster's controller (it cancels its simulations and saves its state) and wait for its lock
    to be released; returns its pid, or None when none ran. SIGKILL after `timeout`; no lock file is left."""
    return pidlock.stop_holder(lock_path(name), timeout)
