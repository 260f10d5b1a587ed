"""spec.multiplexing on this machine: `minicluster up` starts the multiplexing controller (one per cluster, a lock
refuses a second), it deploys a simulation on the real pods, writes its events into the lead's REST state
directory, `status` shows it, and `minicluster down` stops it."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from elasticity.control.events import read_events
from elasticity.figures.timeline import timeline_rows
from elasticity.workloads.proxy import build_proxy_solver
from miniclusters.backends.local.backend import LocalBackend
from miniclusters.multiplex.state_file import state_file

pytestmark = pytest.mark.needs_root


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _spec(directory: Path, name: str, **multiplexing: Any) -> Path:
    data = {
        "apiVersion": "miniclusters.dev/v1alpha1",
        "kind": "MiniCluster",
        "metadata": {"name": name},
        "spec": {
            "size": 2,
            "tasks": 4,
            "interactive": True,
            "containers": [{"image": "local", "resources": {"requests": {"cpu": "1"}}}],
            "multiplexing": multiplexing,
        },
    }
    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _outputs(work: Path, controller: Path) -> str:
    """What to read when the controller or its simulations stopped early."""
    texts = [f"{p}:\n{p.read_text(errors='replace')[-1500:]}" for p in sorted(work.glob("sim*/output.txt"))]
    if controller.exists():
        texts.append(f"{controller}:\n{controller.read_text(errors='replace')[-3000:]}")
    return "\n".join(texts)


def test_up_starts_the_controller_and_down_stops_it(
    mc: Callable[..., subprocess.CompletedProcess[str]],
    backend: LocalBackend,
    waiter: Callable[..., Any],
    tmp_path: Path,
) -> None:
    build_proxy_solver()
    # long enough to be running when `down` comes: down must stop it, not its simulations finishing
    # profileTogether: both simulations start at once and are profiled side by side
    spec = _spec(tmp_path, "muxup", enabled=True, command="proxy_solver 200000 2048 32 1,1,1,20", max=2,
                 profileIterations=20, profileTogether=2, workdir=str(tmp_path / "work"))  # fmt: skip
    up = mc("up", str(spec), timeout=120)
    assert up.returncode == 0, up.stderr
    found = re.search(r"multiplexing controller: pid (\d+); events (\S+); timeline (\S+)", up.stdout)
    assert found, up.stdout
    pid, events = int(found[1]), Path(found[2])
    output = events.with_suffix(".log")
    try:
        assert alive(pid), output.read_text() if output.exists() else "no output"

        def state() -> dict[str, Any]:
            document = json.loads(mc("status", "muxup", "-o", "json").stdout)
            return document.get("multiplexing") or {}

        # it deployed a simulation on the pods, as a Flux job of the lead broker
        assert waiter(lambda: any(s["state"] == "running" for s in state().get("simulations", [])), timeout=90), (
            output.read_text()
        )
        current = state()
        assert current["running"] is True, _outputs(tmp_path / "work", output)
        assert current["running"] is True and current["started_by"] == "up" and current["controller_pid"] == pid
        assert current["last_event"] is not None
        jobs = mc("exec", "muxup", "--", "flux", "jobs", "-a", "--format", "{name} {status}").stdout
        # Flux jobs of the lead broker (their state by now is the solver's business), both from the first step
        assert "sim1 " in jobs and "sim2 " in jobs, jobs
        first = [e for e in read_events(events) if e["kind"] == "start"]
        assert [e["sim"] for e in first] == ["sim1", "sim2"] and first[0]["t"] == first[1]["t"], first
        text = mc("status", "muxup").stdout
        assert f"Multiplexing (running, pid {pid}, started by up)" in text and "last event:" in text, text

        # one controller per cluster: a second is refused, naming the first
        second = mc("multiplex", "muxup", "--timeout", "5")
        assert second.returncode != 0 and f"already multiplexed by pid {pid}" in second.stderr

        # its events, also in the lead's REST state directory (the web UI's /cluster page reads them there)
        lead_copy = backend.store.pod_dir("muxup", 0) / "run" / "state" / "restful" / "controllers" / "multiplex.jsonl"
        assert waiter(lambda: lead_copy.is_file() and "submitted" in lead_copy.read_text(), timeout=10)
        mirrored = [e["kind"] for e in read_events(lead_copy)]
        assert "submitted" in mirrored and mirrored == [e["kind"] for e in read_events(events)][: len(mirrored)]
    finally:
        down = mc("down", "muxup", timeout=60)
    assert down.returncode == 0, down.stderr
    assert f"stopped the multiplexing controller (pid {pid})" in down.stdout
    assert waiter(lambda: not alive(pid), timeout=20)
    log = output.read_text()
    assert "interrupted: running simulations cancelled" in log, log[-2000:]
    assert any(e["kind"] == "submitted" for e in read_events(events))
    # what down stopped is recorded as cancelled: in the saved state, once per simulation in the events, and the
    # log (so the timeline) closes with the controller's stop
    saved = json.loads(state_file("local", "muxup").read_text())
    assert saved["running"] is False and saved["simulations"], saved
    assert {s["state"] for s in saved["simulations"]} == {"cancelled"}, saved["simulations"]
    recorded = list(read_events(events))
    started = {e["sim"] for e in recorded if e["kind"] == "start"}
    ends = [e["sim"] for e in recorded if e["kind"] in ("done", "failed", "cancelled", "timeout")]
    assert sorted(ends) == sorted(started), recorded[-5:]
    assert recorded[-1]["kind"] == "controller-stop" and recorded[-1]["state"] == "cancelled"
    assert all(row["end"] is not None for row in timeline_rows(recorded).values())


def test_up_refuses_bad_multiplexing_values_naming_the_field(
    mc: Callable[..., subprocess.CompletedProcess[str]], machine: Any, tmp_path: Path
) -> None:
    for fields, field in (
        ({"enabled": True}, "spec.multiplexing.command"),
        ({"enabled": True, "command": "x", "max": 3, "total": 2}, "spec.multiplexing.total"),
        ({"enabled": True, "command": "x", "fairness": 0.5}, "fairness"),
        ({"enabled": True, "command": "x", "workdir": "relative"}, "spec.multiplexing.workdir"),
        ({"enabled": True, "command": "x", "ranks": 1}, "spec.multiplexing.ranks"),
        ({"enabled": True, "command": "x", "max": 2, "profileTogether": 3}, "spec.multiplexing.profileTogether"),
    ):
        result = mc("up", str(_spec(tmp_path, "muxbadup", **fields)))
        assert result.returncode == 2, (fields, result.stderr)
        assert field in result.stderr, (fields, result.stderr)
        assert "multiplexing controller" not in result.stdout
    assert mc("status", "muxbadup").returncode == 1, "nothing was created"
