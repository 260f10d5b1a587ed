"""What `minicluster status` says about a multiplexing controller from its saved state: who started it, its phase,
its last event, and that a killed controller is not shown as running."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from miniclusters.multiplex.report import print_controller_state
from miniclusters.multiplex.state_file import load_state, state_file


def _state(pid: int, **extra: object) -> dict[str, object]:
    return {
        "cluster": "mux",
        "controller_pid": pid,
        "running": True,
        "phase": "pack",
        "simulations": [{"sim": "sim1", "state": "running"}, {"sim": "sim2", "state": "pending"}],
        "requested_m": 1450,
        "resizes": 3,
        "restarts": 0,
        "beta": 0.25,
        "blocked": None,
        "started_by": "up",
        "last_event": {"t": 12.5, "event": "submitted", "sim": "sim2", "job": "f2"},
        **extra,
    }


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MINICLUSTERS_STATE_DIR", str(tmp_path))
    return tmp_path


def _save(data: dict[str, object]) -> None:
    path = state_file("local", "mux")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def test_a_running_controller_shows_its_phase_starter_and_last_event(capsys: pytest.CaptureFixture[str]) -> None:
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        _save(_state(sleeper.pid))
        state = load_state("local", "mux")
        assert state is not None and state["running"] is True
        print_controller_state(state)
    finally:
        sleeper.kill()
        sleeper.wait()
    out = capsys.readouterr().out
    assert f"Multiplexing (running, pid {sleeper.pid}, started by up): phase pack" in out
    assert "simulations 1 pending, 1 running; requested 1450m; resizes 3, pod restarts 0, beta 0.250" in out
    assert "last event: submitted at 12.5s sim=sim2 job=f2" in out


def test_a_killed_controller_is_shown_stopped(capsys: pytest.CaptureFixture[str]) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    _save(_state(gone.pid))
    state = load_state("local", "mux")
    assert state is not None and state["running"] is False and "is gone" in str(state["stopped"])
    print_controller_state(state)
    assert f"Multiplexing (stopped: its process {gone.pid} is gone" in capsys.readouterr().out
