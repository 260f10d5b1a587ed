"""examples/autoscale.yaml on this machine: `minicluster up` starts the autoscaler (spec.autoscale.enabled); the
1-pod MiniCluster (maxSize 4) gets 20 jobs of 1-4 nodes, scales up, runs them all, and scales back to 1 pod
after the idle period; nothing is lost; a PNG of size and queue over time, the event log mirrored for the lead's
/cluster page; `down` ends the loop."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from elasticity.control.events import read_events
from miniclusters.backends.local.backend import LocalBackend

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "autoscale.yaml"


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.needs_root
def test_autoscale_example(
    mc: Callable[..., subprocess.CompletedProcess[str]],
    backend: LocalBackend,
    waiter: Callable[..., Any],
) -> None:
    up = mc("up", str(EXAMPLE), timeout=120)
    assert up.returncode == 0, up.stderr
    found = re.search(r"autoscaler: pid (\d+); events (\S+); timeline (\S+)", up.stdout)
    assert found, up.stdout
    pid, events, png = int(found[1]), Path(found[2]), Path(found[3])
    assert alive(pid) and backend.status("autoscale").size == 1
    # A second loop for the same cluster is refused: one writer of its size.
    second = mc("autoscale", "autoscale", "--timeout", "5")
    assert second.returncode != 0 and f"already autoscaled by pid {pid}" in second.stderr

    for i in range(20):
        sub = mc("exec", "autoscale", "--", "flux", "submit", "-N", str(1 + i % 4), "sleep", "2")
        assert sub.returncode == 0, sub.stderr

    def jobs() -> list[dict[str, Any]]:
        listed = json.loads(mc("exec", "autoscale", "--", "flux", "jobs", "-a", "--json").stdout)
        return listed["jobs"] if isinstance(listed, dict) else listed

    assert waiter(lambda: all(j["state"] == "INACTIVE" for j in jobs()), timeout=240, interval=2)
    finished = jobs()
    assert len(finished) == 20 and all(j["result"] == "COMPLETED" for j in finished)
    # Idle for idleSeconds (10): drained and back to one pod.
    assert waiter(lambda: backend.status("autoscale").size == 1, timeout=60, interval=1)
    time.sleep(1.5)
    log = list(read_events(events))
    sizes = [e["size"] for e in log if e["kind"] == "sample"]
    assert sizes[0] == 1 and max(sizes) == 4, sizes
    scaled = [(e["previous"], e["size"]) for e in log if e["kind"] == "scaled"]
    assert any(after > before for before, after in scaled) and scaled[-1][1] == 1
    for before, after in scaled:  # every shrink drained the ranks it removed first
        if after < before:
            assert any(set(range(after, before)) <= set(e["ranks"]) for e in log if e["kind"] == "drain")
    # the same events at the lead's REST state dir, where its /cluster page draws the autoscaling timeline
    mirrored = list(read_events(backend.store.lead_rest_state_dir("autoscale") / "controllers" / "autoscale.jsonl"))
    assert len(mirrored) >= len(log) - 1 and list(read_events(events))[: len(mirrored)] == mirrored
    assert mc("down", "autoscale").returncode == 0
    assert waiter(lambda: not alive(pid), timeout=30)  # the loop ended with its cluster
    assert png.is_file(), events.with_suffix(".log").read_text()[-3000:]
    assert png.read_bytes()[:4] == b"\x89PNG"
