"""One loop per cluster: a controller `up` starts in the background holds its lock before `up` names its pid.

CI saw `minicluster autoscale autoscale` run (exit 0) beside the autoscaler `up` had just announced: `up` printed the
child's pid at once, and the child took the lock only after its imports and a first look at the cluster, so a second
loop started in between took it first. These tests start the background controllers with a stand-in program that
never takes any lock itself (it sleeps): whatever holds the lock, `up`'s start function made it so.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from miniclusters import pidlock
from miniclusters.cli import main

PYTHON = sys.executable


@pytest.fixture
def state(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("MINICLUSTERS_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


@pytest.fixture
def sleeper(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[list[int]]:
    """`minicluster` beside sys.executable is a program that sleeps and locks nothing; the pids it ran as are
    ended after the test."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    program = bin_dir / "minicluster"
    program.write_text("#!/bin/sh\nexec sleep 60\n")
    program.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(bin_dir / "python"))
    started: list[int] = []
    yield started
    for pid in started:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


def _start_autoscaler(name: str) -> int:
    from miniclusters.autoscaling.runner import start_in_background

    return start_in_background(name, "/nonexistent/spec.yaml", "local")[0]


def _start_multiplexer(name: str) -> int:
    from miniclusters.multiplex.background import start_in_background

    return start_in_background(name, "local")[0]


def _autoscale_lock(name: str) -> Path:
    from miniclusters.autoscaling.state import autoscale_dir

    return autoscale_dir() / f"{name}.lock"


def _multiplex_lock(name: str) -> Path:
    from miniclusters.multiplex.background import lock_path

    return lock_path(name)


LOOPS = [
    pytest.param(_start_autoscaler, _autoscale_lock, "autoscaled", id="autoscaler"),
    pytest.param(_start_multiplexer, _multiplex_lock, "multiplexed", id="multiplexer"),
]


@pytest.mark.parametrize(("start", "lock_of", "word"), LOOPS)
def test_a_background_controller_holds_its_lock_before_its_pid_is_named(
    state: Path,
    sleeper: list[int],
    start: Callable[[str], int],
    lock_of: Callable[[str], Path],
    word: str,
) -> None:
    lock = lock_of("c")
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text("4242")  # a killed controller's pid: never shown as the holder's
    pid = start("c")
    sleeper.append(pid)
    assert pidlock.holder(lock) == pid  # was None: the child had not taken it yet, a second loop could
    refused = pytest.raises(pidlock.AlreadyRunning, match=f"already {word} by pid {pid} ")
    with refused, pidlock.exclusive(lock, f"MiniCluster 'c' is already {word}"):
        pass
    with pytest.raises(pidlock.AlreadyRunning, match=f"already {word} by pid {pid} "):
        sleeper.append(start("c"))  # `up` of the same cluster again: refused, nothing started
    assert len(sleeper) == 1
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    assert pidlock.holder(lock) is None  # the kernel let go with the process


ADOPT = """
import os, sys
from pathlib import Path
from miniclusters import pidlock
with pidlock.exclusive(Path(sys.argv[1]), "c is autoscaled"):
    print(Path(sys.argv[1]).read_text(), os.environ.get(pidlock.HANDED), flush=True)
    sys.stdin.readline()
"""


def test_the_child_adopts_the_lock_it_was_started_holding(tmp_path: Path) -> None:
    lock = tmp_path / ".autoscaler" / "c.lock"
    child = pidlock.spawn_holding(
        lock, "c is autoscaled", [PYTHON, "-c", ADOPT, str(lock)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert child.stdin is not None and child.stdout is not None
    assert pidlock.holder(lock) == child.pid
    # its own pid, and the handed descriptor is its alone (not passed on to what it starts)
    assert child.stdout.readline().decode().split() == [str(child.pid), "None"]
    child.stdin.write(b"\n")
    child.stdin.close()
    assert child.wait(timeout=30) == 0
    assert not lock.exists()  # a controller that ends takes its lock file with it


def test_a_refused_start_clears_nothing(tmp_path: Path) -> None:
    lock = tmp_path / "c.lock"
    cleared: list[bool] = []
    refused = pytest.raises(pidlock.AlreadyRunning, match=f"by pid {os.getpid()} ")
    with pidlock.exclusive(lock, "c is autoscaled"), refused:
        pidlock.spawn_holding(lock, "c is autoscaled", ["true"], prepare=lambda: cleared.append(True))
    assert cleared == []


def test_a_holder_looking_does_not_refuse_a_loop_starting(tmp_path: Path) -> None:
    """`minicluster status` (holder()) holds the lock for a moment to look: a loop starting then is not refused."""
    lock = tmp_path / "c.lock"
    looking = subprocess.Popen(
        [PYTHON, "-c", "import fcntl, sys, time; f = open(sys.argv[1], 'a+'); fcntl.flock(f, fcntl.LOCK_EX); "
         "print('held', flush=True); time.sleep(0.2)", str(lock)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert looking.stdout is not None and looking.stdout.readline().strip() == "held"
    with pidlock.exclusive(lock, "c is autoscaled"):  # was: AlreadyRunning "by pid ?" (the look held it)
        assert lock.read_text() == str(os.getpid())
    looking.wait(timeout=10)


def test_the_autoscaler_takes_its_lock_before_it_looks_at_the_cluster(state: Path) -> None:
    from elasticity.policy.autoscale import AutoscaleOptions
    from miniclusters.autoscaling.runner import RunOptions, exclusive, run_autoscaler

    class Untouchable:
        def __getattr__(self, name: str) -> object:
            raise AssertionError(f"looked at the cluster ({name}) before holding the lock")

    said: list[str] = []
    refused = pytest.raises(pidlock.AlreadyRunning, match=f"already autoscaled by pid {os.getpid()} ")
    with exclusive("c"), refused:
        run_autoscaler(Untouchable(), Untouchable(), "c", AutoscaleOptions(), RunOptions(1.0), said.append)  # type: ignore[arg-type]
    assert said == []


@pytest.mark.parametrize("backend", ["local", "podman"])
def test_a_second_multiplexer_is_refused_before_it_looks_at_the_cluster(state: Path, backend: str) -> None:
    from miniclusters.multiplex.background import exclusive

    with exclusive("c"):
        result = CliRunner().invoke(main, ["multiplex", "c", "--backend", backend, "--command", "true"])
    assert result.exit_code == 1, result.output
    assert f"MiniCluster 'c' is already multiplexed by pid {os.getpid()}" in result.output  # podman took no lock
