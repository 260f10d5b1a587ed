"""Commands run in a pod (`minicluster exec`, the status's questions to the lead) end at their timeout, and when
the `minicluster exec` that asked for them is ended."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from miniclusters.backends.local.process import run_bounded
from tests.waiting import wait_until


def test_a_command_and_everything_it_started_are_stopped_at_the_timeout(tmp_path: Path) -> None:
    """The whole session goes: subprocess.run killed only the shell and left its child running."""
    pidfile = tmp_path / "child.pid"
    # at its timeout: waiting for the child's 600 s would pass pytest's timeout
    with pytest.raises(subprocess.TimeoutExpired):
        run_bounded(["sh", "-c", f"sleep 600 & echo $! > {pidfile}; wait"], dict(os.environ), str(tmp_path), 1.0)
    child = int(pidfile.read_text())
    wait_until(f"the shell's child {child} ends", lambda: _ended(child), timeout=10)


def _ended(pid: int) -> bool:
    try:
        return "Z" in Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True


def test_a_command_that_ends_gives_its_output_and_code(tmp_path: Path) -> None:
    done = run_bounded(["sh", "-c", "echo out; echo err >&2; exit 3"], dict(os.environ), str(tmp_path), 10.0)
    assert (done.returncode, done.stdout, done.stderr) == (3, "out\n", "err\n")


def from_a_terminal(argv: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
    """Start with Ctrl-C's default disposition, as a terminal's shell does (see test_local_interrupts.py)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return subprocess.Popen(argv, **kwargs)
    finally:
        signal.signal(signal.SIGINT, previous)


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_ending_minicluster_exec_ends_the_command_in_the_pod(
    signum: int, mc: Any, machine: Any, spec_writer: Any, waiter: Any, minicluster_bin: str, tmp_path: Path
) -> None:
    """SIGTERM (as `timeout` sends), a lost terminal or Ctrl-C: the command, what it started and what left its
    session all end, as `kubectl exec -t` ends its stream and the process loses its terminal (issue 41)."""
    spec = spec_writer(machine.state_dir, "exe", size=1, max_size=1)
    up = mc("up", str(spec), "--detach")
    assert up.returncode == 0, up.stderr
    pids = tmp_path / "pids"
    script = f"sleep 300 & a=$!; setsid sleep 301 & echo $$ $a $! > {pids}.tmp; mv {pids}.tmp {pids}; wait"
    err = tmp_path / "err"
    with open(err, "w") as stderr:
        proc = from_a_terminal([minicluster_bin, "exec", "exe", "--", "sh", "-c", script], stderr=stderr)
    try:
        assert waiter(pids.exists, timeout=60), err.read_text()
        started = [int(p) for p in pids.read_text().split()]
        assert all(_running(p) for p in started)
        proc.send_signal(signum)
        code = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert waiter(lambda: not any(_running(p) for p in started), timeout=15), [p for p in started if _running(p)]
    assert code == 128 + signum, err.read_text()
    assert "Traceback" not in err.read_text()
