"""examples/autoscale.yaml on this machine: a 1-pod MiniCluster (maxSize 4) gets 20 jobs of 1-4 nodes, scales up,
runs them all, and scales back to 1 pod after the idle period; nothing is lost; a PNG of size and queue."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from elasticity.control.events import read_events
from miniclusters.backends.local.backend import LocalBackend

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "autoscale.yaml"


@pytest.mark.needs_root
def test_autoscale_example(
    mc: Callable[..., subprocess.CompletedProcess[str]], backend: LocalBackend, tmp_path: Path
) -> None:
    up = mc("up", str(EXAMPLE), timeout=120)
    assert up.returncode == 0, up.stderr
    assert backend.status("autoscale").size == 1
    ids = []
    for i in range(20):
        nodes = 1 + i % 4
        sub = mc("exec", "autoscale", "--", "flux", "submit", "-N", str(nodes), "sleep", "2")
        assert sub.returncode == 0, sub.stderr
        ids.append(sub.stdout.strip())
    events, png = tmp_path / "events.jsonl", tmp_path / "autoscale.png"
    run = mc(
        "autoscale", "autoscale", "--spec", str(EXAMPLE), "--until-idle", "--timeout", "240",
        "--events", str(events), "--plot", str(png), timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    log = list(read_events(events))
    sizes = [e["size"] for e in log if e["kind"] == "sample"]
    assert sizes[0] == 1 and max(sizes) == 4 and sizes[-1] == 1, run.stderr[-2000:]
    scaled = [(e["previous"], e["size"]) for e in log if e["kind"] == "scaled"]
    assert any(after > before for before, after in scaled) and scaled[-1][1] == 1
    # Every shrink drained the ranks it removed first.
    for before, after in scaled:
        if after < before:
            assert any(set(range(after, before)) <= set(e["ranks"]) for e in log if e["kind"] == "drain")
    assert backend.status("autoscale").size == 1
    jobs = mc("exec", "autoscale", "--", "flux", "jobs", "-a", "--json")
    assert jobs.returncode == 0, jobs.stderr
    listed = json.loads(jobs.stdout)
    records = listed["jobs"] if isinstance(listed, dict) else listed
    results = {str(j["id"]): j for j in records}
    assert len(results) == 20
    assert all(j["result"] == "COMPLETED" for j in results.values()), [j["result"] for j in results.values()]
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert mc("down", "autoscale").returncode == 0
