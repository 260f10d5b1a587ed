"""A crashed run's empty network namespaces do not block the next `up` (the README's examples failed in CI on a
machine where an earlier run had been killed); a namespace with a live process in it still refuses, naming it."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from miniclusters.backends.local import netns

pytestmark = pytest.mark.needs_root


def test_empty_namespaces_of_a_crashed_run_are_removed_and_up_succeeds(
    mc: Callable[..., Any], spec_writer: Callable[..., Path], tmp_path: Path
) -> None:
    spec = spec_writer(tmp_path, "stale", size=1, max_size=1)
    for name in ("mc-stale-0", "mc-stale-3"):  # an interrupted run of this test may have left them: start clean
        subprocess.run(["ip", "netns", "del", name], check=False, capture_output=True)
        subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        up = mc("up", str(spec), "--detach")
        assert up.returncode == 0, up.stderr
        assert "removed 2 empty network namespace(s)" in up.stdout + up.stderr
        assert "mc-stale-3" not in netns.list_namespaces()
        assert "mc-stale-0" in netns.list_namespaces()  # the new pod's own
        assert mc("down", "stale").returncode == 0
    finally:
        for name in ("mc-stale-0", "mc-stale-3"):
            subprocess.run(["ip", "netns", "del", name], check=False, capture_output=True)


def test_a_namespace_with_a_live_process_refuses_naming_it(
    mc: Callable[..., Any], spec_writer: Callable[..., Path], tmp_path: Path
) -> None:
    spec = spec_writer(tmp_path, "busy", size=1, max_size=1)
    subprocess.run(["ip", "netns", "del", "mc-busy-0"], check=False, capture_output=True)  # an interrupted run's
    subprocess.run(["ip", "netns", "add", "mc-busy-0"], check=True)
    sleeper = subprocess.Popen(["ip", "netns", "exec", "mc-busy-0", "sleep", "60"])
    try:
        up = mc("up", str(spec), "--detach")
        assert up.returncode == 2
        assert "mc-busy-0" in up.stderr and "processes in it" in up.stderr
        assert "mc-busy-0" in netns.list_namespaces()  # nothing removed
    finally:
        sleeper.kill()
        sleeper.wait()
        subprocess.run(["ip", "netns", "del", "mc-busy-0"], check=False)
