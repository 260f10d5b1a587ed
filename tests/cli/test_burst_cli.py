"""`minicluster burst` refuses what it cannot do with exit 2 and the flag named: a burst larger than the burst
service may bring, and the release of a burst that is not there; nothing is registered, launched or removed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from bursting.state_file import BurstRecord, StateFile
from miniclusters.backends.local.state import StateStore
from miniclusters.cli import burst_commands, main


class _Opened:
    """What `open_backend` gives the command: a backend offering the lead's context (as the local backend does)."""

    name = "local"

    def __init__(self, state_file: Path) -> None:
        self.state_file = state_file

    def lead_context(self, name: str) -> dict[str, Any]:
        spec = {
            "metadata": {"name": name},
            "spec": {"flux": {"bursting": {"plugins": [{"name": "local", "size": 2}]}}},
        }
        context = {"cluster": name, "spec": spec, "certificate": "", "options": {"state_dir": "/nonexistent"}}
        return {"context": context, "lead_uri": "local:///nonexistent/local", "state_file": str(self.state_file)}


@pytest.fixture
def state_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "bursts.json"
    monkeypatch.setattr(burst_commands, "open_backend", lambda *_args: _Opened(path))
    return path


def test_a_burst_by_hand_larger_than_the_service_may_bring_is_refused(state_file: Path) -> None:
    result = CliRunner().invoke(main, ["burst", "c", "--plugin", "local", "--nodes", "3"])
    assert result.exit_code == 2, result.output
    assert "--nodes 3: local: 3 node(s) asked, this machine takes at most 2 burst pods" in result.stderr
    assert StateFile(state_file).read().bursts == {}  # nothing registered, nothing launched


def test_releasing_a_burst_that_is_not_there_exits_2_naming_those_there_are(state_file: Path) -> None:
    with StateFile(state_file).update() as state:
        state.bursts["c-b1"] = BurstRecord("c-b1", 1, "local", [2], ["c-0", "c-1"], state="up")
    before = json.loads(state_file.read_text())
    result = CliRunner().invoke(main, ["burst", "c", "--release", "c-b9"])
    assert result.exit_code == 2, result.output
    assert "--release: no burst 'c-b9' of c (its bursts: c-b1)" in result.stderr
    assert json.loads(state_file.read_text()) == before


@pytest.mark.parametrize("idle", ["soon", "-5", "5 minutes"])
def test_up_refuses_a_malformed_burst_idle_period_before_creating_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, idle: str
) -> None:
    monkeypatch.setenv("MINICLUSTERS_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("MINICLUSTERS_BURST_IDLE", idle)
    example = Path(__file__).resolve().parents[2] / "examples" / "burst.yaml"
    try:
        result = CliRunner().invoke(main, ["up", str(example), "--backend", "local", "--detach"])
        assert result.exit_code == 2, result.output
        assert f"$MINICLUSTERS_BURST_IDLE: {idle!r} is not a duration" in result.stderr
        assert StateStore(tmp_path / "state").names() == []  # nothing was created
    finally:  # had it been created (the bug), its pods must not outlive the test
        for name in StateStore(tmp_path / "state").names():
            CliRunner().invoke(main, ["down", name, "--backend", "local"])
