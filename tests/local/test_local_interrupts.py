"""Ctrl-C ends every long-running verb with exit code 130 (issue 24), as a shell reports a program SIGINT ended:
`logs --follow`, `autoscale` and `profile` here; `up` in test_local_teardown.py and test_local_cluster.py."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _as_from_a_terminal(argv: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
    """Start `argv` with Ctrl-C's default disposition, as a terminal's shell starts a command.

    Where the tests themselves run as a background job of a non-interactive shell (`make test &`), SIGINT is
    ignored, children inherit that, and a program started so rightly keeps ignoring it (Python installs no
    KeyboardInterrupt then). A handler, unlike an ignore, is reset to the default by exec: install one for the
    moment of the start."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return subprocess.Popen(argv, **kwargs)
    finally:
        signal.signal(signal.SIGINT, previous)


def _interrupted(argv: list[str], ready: Callable[[str, str], bool], waiter: Any, directory: Path) -> tuple[int, str]:
    """Start `argv`, wait until ready(stdout, stderr), send SIGINT; (exit code, stderr)."""
    out, err = directory / "out", directory / "err"
    with open(out, "w") as stdout, open(err, "w") as stderr:
        proc = _as_from_a_terminal(argv, stdout=stdout, stderr=stderr, cwd=directory)
    try:
        started = waiter(lambda: ready(out.read_text(), err.read_text()) or proc.poll() is not None, timeout=120)
        assert started and proc.poll() is None, err.read_text()
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return code, err.read_text()


def test_ctrl_c_ends_logs_follow_and_autoscale_with_130(
    mc: Any, machine: Any, spec_writer: Any, waiter: Any, minicluster_bin: str, tmp_path: Path
) -> None:
    spec = spec_writer(machine.state_dir, "sig", size=1, max_size=2)
    up = mc("up", str(spec), "--detach")
    assert up.returncode == 0, up.stderr

    (tmp_path / "logs").mkdir()
    code, stderr = _interrupted(
        [minicluster_bin, "logs", "sig", "--follow"], lambda out, _err: "lead broker" in out, waiter, tmp_path / "logs"
    )
    assert code == 130, stderr
    assert "Aborted!" not in stderr and "Traceback" not in stderr

    (tmp_path / "autoscale").mkdir()
    events = tmp_path / "autoscale" / "events.jsonl"
    code, stderr = _interrupted(
        [minicluster_bin, "autoscale", "sig", "--interval", "0.5", "--events", str(events)],
        lambda _out, err: "autoscaling sig" in err,
        waiter,
        tmp_path / "autoscale",
    )
    assert code == 130, stderr
    assert "stopped: interrupted" in stderr and "Traceback" not in stderr


def test_ctrl_c_ends_profile_with_130(minicluster_bin: str, waiter: Any, tmp_path: Path) -> None:
    from broker.testing import require_tool

    require_tool("mpicc", "libopenmpi-dev openmpi-bin")  # the profiler library is built before the run starts
    traces = tmp_path / "traces"
    code, stderr = _interrupted(
        [minicluster_bin, "profile", "--traces", str(traces), "--", "sleep", "60"],
        lambda _out, err: "profiling sleep 60" in err,
        waiter,
        tmp_path,
    )
    assert code == 130, stderr
    assert "Aborted!" not in stderr and "Traceback" not in stderr
    assert stderr.count("interrupted") == 1
