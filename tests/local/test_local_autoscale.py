"""examples/autoscale.yaml on this machine: `minicluster up` starts the autoscaler (spec.autoscale.enabled); the
1-pod MiniCluster (maxSize 4) gets 20 jobs of 1-4 nodes, scales up, runs them all, and scales back to 1 pod
after the idle period; nothing is lost; a PNG of size and queue over time, the event log mirrored for the lead's
/cluster page; `down` ends the loop."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from elasticity.control.events import read_events
from miniclusters.backends.local.backend import LocalBackend
from tests.waiting import wait_until

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
    mirror = backend.store.lead_rest_state_dir("autoscale") / "controllers" / "autoscale.jsonl"

    def shrink_recorded() -> bool:
        scaled = [e for e in read_events(events) if e["kind"] == "scaled"]
        mirrored = list(read_events(mirror)) if mirror.is_file() else []
        return bool(scaled) and scaled[-1]["size"] == 1 and len(mirrored) >= len(list(read_events(events))) - 1

    wait_until("the shrink to one pod in the events and their mirror", shrink_recorded, timeout=30)
    log = list(read_events(events))
    sizes = [e["size"] for e in log if e["kind"] == "sample"]
    assert sizes[0] == 1 and max(sizes) == 4, sizes
    scaled = [(e["previous"], e["size"]) for e in log if e["kind"] == "scaled"]
    assert any(after > before for before, after in scaled) and scaled[-1][1] == 1
    for before, after in scaled:  # every shrink drained the ranks it removed first
        if after < before:
            assert any(set(range(after, before)) <= set(e["ranks"]) for e in log if e["kind"] == "drain")
    # the same events at the lead's REST state dir, where its /cluster page draws the autoscaling timeline
    mirrored = list(read_events(mirror))
    assert len(mirrored) >= len(log) - 1 and list(read_events(events))[: len(mirrored)] == mirrored
    assert mc("down", "autoscale").returncode == 0
    assert waiter(lambda: not alive(pid), timeout=30)  # the loop ended with its cluster
    assert png.is_file(), events.with_suffix(".log").read_text()[-3000:]
    assert png.read_bytes()[:4] == b"\x89PNG"


def _drain_spec(directory: Path) -> Path:
    """3 pods at most, idle after 1 s, a cool-down long enough that a drain waits in place after a scale-up."""
    data = {
        "apiVersion": "miniclusters.dev/v1alpha1",
        "kind": "MiniCluster",
        "metadata": {"name": "asdrain"},
        "spec": {
            "size": 1,
            "maxSize": 3,
            "interactive": True,
            "autoscale": {"enabled": True, "idleSeconds": 1, "cooldownSeconds": 600, "intervalSeconds": 0.5},
            "containers": [{"image": "local", "resources": {"requests": {"cpu": "250m"}}}],
        },
    }
    path = directory / "asdrain.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.needs_root
def test_an_autoscaler_killed_mid_drain_leaves_drains_that_show_and_the_next_loop_undrains_its_own(
    mc: Callable[..., subprocess.CompletedProcess[str]],
    backend: LocalBackend,
    waiter: Callable[..., Any],
    tmp_path: Path,
) -> None:
    spec = _drain_spec(tmp_path)
    up = mc("up", str(spec), timeout=120)
    assert up.returncode == 0, up.stderr
    found = re.search(r"autoscaler: pid (\d+); events (\S+);", up.stdout)
    assert found, up.stdout
    pid, events = int(found[1]), Path(found[2])

    def flux(*args: str) -> subprocess.CompletedProcess[str]:
        return mc("exec", "asdrain", "--", "flux", *args)

    assert flux("submit", "-N", "3", "sleep", "1").returncode == 0

    # grown to 3 for the job; once it ended and 1 s passed idle, ranks 1-2 are drained and the cool-down holds
    def drained_1_2() -> bool:  # the log exists once the autoscaler records its first event
        return events.exists() and any(e["kind"] == "drain" and e["ranks"] == [1, 2] for e in read_events(events))

    drained = waiter(drained_1_2, 90, 0.5)
    assert drained, events.with_suffix(".log").read_text()[-2000:]
    os.kill(pid, signal.SIGKILL)  # killed mid-drain: nothing undrains
    assert waiter(lambda: not alive(pid), timeout=10)
    assert backend.status("asdrain").size == 3
    force = flux("resource", "drain", "-f", "2", "disk", "check")  # an operator takes rank 2 over, by hand
    assert force.returncode == 0, force.stderr

    # drained ranks are not free; a job that needs them says why it waits; status shows the dead loop and drains
    rows = {line.split()[0]: line.split() for line in flux("resource", "list").stdout.splitlines()[1:]}
    assert rows["free"][1] == "1" and rows["drained"][1] == "2", rows
    job = flux("submit", "-N", "2", "sleep", "60").stdout.strip()

    def reasons() -> str:
        listed = flux("jobs", "--no-header", "-o", "{id.f58} {contextual_info}").stdout
        return listed if "waiting" in listed else ""

    why = waiter(reasons, 10) or flux("jobs", "-a").stdout
    assert f"{job} waiting for drained ranks 1 (autoscaler: draining for a scale-down), 2 (disk check)" in why, why
    text = mc("status", "asdrain").stdout
    assert f"Autoscaling (stopped: its process {pid} is gone (killed?), pid {pid}, started by up)" in text, text
    assert "Drained ranks 1 (asdrain-1): drained since" in text and "autoscaler: draining for a scale-down" in text
    assert "Drained ranks 2 (asdrain-2): drained since" in text and "disk check" in text
    document = json.loads(mc("status", "asdrain", "-o", "json").stdout)
    assert document["autoscaling"]["running"] is False and document["autoscaling"]["draining"] == [1, 2]
    assert [(d["ranks"], d["reason"]) for d in document["drained"]] == [
        ("1", "autoscaler: draining for a scale-down"),
        ("2", "disk check"),
    ]

    # the next loop undrains what the killed one drained, and only that: the job runs on ranks 0-1
    again = mc("autoscale", "asdrain", "--spec", str(spec), "--timeout", "4", "--interval", "0.5", timeout=60)
    assert again.returncode == 0, again.stderr
    undrained = [e for e in read_events(events) if e["kind"] == "undrain"]
    assert [e["ranks"] for e in undrained] == [[1]], undrained
    state = flux("jobs", "-a", "--no-header", "-o", "{id.f58} {state} {nodelist}").stdout
    assert f"{job} RUN asdrain-[0-1]" in state, state
    listing = flux("resource", "drain").stdout
    assert "disk check" in listing and "autoscaler" not in listing, listing
    stopped = json.loads(mc("status", "asdrain", "-o", "json").stdout)["autoscaling"]
    assert stopped["running"] is False and stopped["stopped"] == "timeout" and stopped["started_by"] == "cli"
