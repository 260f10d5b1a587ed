"""What `minicluster status` says about the autoscaler from its saved state (running, or stopped and why; a killed
loop is never shown running) and about drained ranks (from the lead's queue state, as `flux resource drain`)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from broker.cli.resource_render import drain_rows
from miniclusters.autoscaling.state import AutoscalerState, load_state, save_state, state_file
from miniclusters.cli.autoscale_status import print_autoscaler_state, print_drains


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MINICLUSTERS_STATE_DIR", str(tmp_path))
    return tmp_path


def _save(pid: int, running: bool = True, stopped: str = "") -> None:
    path = state_file("local", "auto")
    path.parent.mkdir(parents=True, exist_ok=True)
    last = {"kind": "drain", "ranks": [1, 2], "reason": "cooling down", "at": 1.0}
    fields: AutoscalerState = {"cluster": "auto", "running": running, "started_by": "up", "size": 3, "wanted": 1,
                               "draining": [1, 2], "last_event": last}  # fmt: skip
    if stopped:
        fields["stopped"] = stopped
    save_state(path, fields)
    data = json.loads(path.read_text())
    data["pid"] = pid
    path.write_text(json.dumps(data))


def test_a_killed_loop_is_shown_stopped_with_the_ranks_it_left_draining(capsys: pytest.CaptureFixture[str]) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    _save(gone.pid)
    state = load_state("local", "auto")
    assert state is not None and state["running"] is False and "is gone" in state["stopped"]
    print_autoscaler_state(state)
    out = capsys.readouterr().out
    assert f"Autoscaling (stopped: its process {gone.pid} is gone (killed?), pid {gone.pid}, started by up)" in out
    assert "size 3, the queue asks for 1; draining ranks 1,2" in out
    assert "last event: drain ranks=[1, 2] reason=cooling down" in out


def test_a_running_loop_and_a_stopped_one_say_so(capsys: pytest.CaptureFixture[str]) -> None:
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        _save(sleeper.pid)
        state = load_state("local", "auto")
        assert state is not None and state["running"] is True
        print_autoscaler_state(state)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert f"Autoscaling (running, pid {sleeper.pid}, started by up)" in capsys.readouterr().out
    _save(sleeper.pid, running=False, stopped="timeout")
    print_autoscaler_state(load_state("local", "auto") or {})
    assert "Autoscaling (stopped: timeout," in capsys.readouterr().out


def test_a_state_directory_that_was_removed_is_not_written_back(tmp_path: Path) -> None:
    save_state(tmp_path / "gone" / "local-auto.json", {"running": False})
    assert not (tmp_path / "gone").exists()


def test_drained_ranks_grouped_by_reason_and_state(capsys: pytest.CaptureFixture[str]) -> None:
    queue = {
        "running": [{"id": 1, "ranks": [0, 2]}],
        "drain": {
            "1": {"reason": "autoscaler: draining for a scale-down", "timestamp": 100.0},
            "2": {"reason": "autoscaler: draining for a scale-down", "timestamp": 100.0},
            "3": {"reason": "autoscaler: draining for a scale-down", "timestamp": 100.0},
            "4": {"reason": "disk check", "timestamp": 50.0},
        },
    }
    rows = drain_rows(queue, ["h0", "h1", "h2", "h3", "h4"])
    assert [(state, ranks, reason, hosts) for _, state, ranks, reason, hosts in rows] == [
        ("drained", "1,3", "autoscaler: draining for a scale-down", "h[1,3]"),
        ("draining", "2", "autoscaler: draining for a scale-down", "h2"),  # a job still runs there
        ("drained", "4", "disk check", "h4"),
    ]
    print_drains([{"since": "T", "state": "drained", "ranks": "4", "reason": "disk check", "hosts": "h4"}])
    assert capsys.readouterr().out == "  Drained ranks 4 (h4): drained since T: disk check\n"
