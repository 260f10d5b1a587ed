"""Commands run in a pod (`minicluster exec`, the status's questions to the lead) end at their timeout."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from miniclusters.backends.local.process import run_bounded


def test_a_command_and_everything_it_started_are_stopped_at_the_timeout(tmp_path: Path) -> None:
    """The whole session goes: subprocess.run killed only the shell and left its child running."""
    pidfile = tmp_path / "child.pid"
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        run_bounded(["sh", "-c", f"sleep 60 & echo $! > {pidfile}; wait"], dict(os.environ), str(tmp_path), 1.0)
    assert time.monotonic() - started < 10
    child = int(pidfile.read_text())
    time.sleep(0.2)
    assert not Path(f"/proc/{child}").exists() or "Z" in Path(f"/proc/{child}/stat").read_text().split()[2]


def test_a_command_that_ends_gives_its_output_and_code(tmp_path: Path) -> None:
    done = run_bounded(["sh", "-c", "echo out; echo err >&2; exit 3"], dict(os.environ), str(tmp_path), 10.0)
    assert (done.returncode, done.stdout, done.stderr) == (3, "out\n", "err\n")
