"""Waiting for the brokers inside the lead (ready.py): the in-pod script's answer, and the fall back to status
reads with one log line when it cannot tell."""

from __future__ import annotations

import json
import logging
import os
import subprocess
from pathlib import Path

import pytest

from miniclusters.api import load_minicluster
from miniclusters.backends.base import BackendError, ExecResult
from miniclusters.backends.podman.ready import WAIT_FOR_BROKERS, await_brokers, waits_inside


def _fake_flux(tmp_path: Path, up: int, size: int) -> dict[str, str]:
    """A `flux` on PATH answering `overlay status --json` with `up` of `size` ranks up (as our CLI prints it)."""
    ranks = [{"rank": r, "state": "up" if r < up else "down"} for r in range(size)]
    flux = tmp_path / "flux"
    flux.write_text(f"#!/bin/sh\necho '{json.dumps({'size': size, 'ranks': ranks})}'\n")
    flux.chmod(0o755)
    return {"PATH": f"{tmp_path}:{os.environ['PATH']}", "FLUX_URI": "local:///nowhere"}


def _wait(env: dict[str, str], size: int, seconds: int) -> int:
    argv = ["sh", "-c", WAIT_FOR_BROKERS, "sh", str(size), str(seconds)]
    return subprocess.run(argv, env=env, capture_output=True, timeout=30, check=False).returncode


def test_the_in_pod_wait_ends_when_every_rank_is_up(tmp_path: Path) -> None:
    assert _wait(_fake_flux(tmp_path, up=4, size=4), 4, 30) == 0


def test_the_in_pod_wait_gives_up_after_its_seconds_while_a_rank_is_down(tmp_path: Path) -> None:
    assert _wait(_fake_flux(tmp_path, up=3, size=4), 4, 1) == 1


def test_a_wait_that_cannot_tell_falls_back_with_one_log_line(caplog: pytest.LogCaptureFixture) -> None:
    def refused(argv: list[str], timeout: float) -> ExecResult:
        raise BackendError("pod c-0 (index 0) is not running")

    with caplog.at_level(logging.WARNING):
        assert not await_brokers(refused, 4, 60)
        assert not await_brokers(lambda argv, timeout: ExecResult(1, "", ""), 4, 60)
    assert len(caplog.records) == 2 and all("reading the status instead" in r.message for r in caplog.records)
    assert await_brokers(lambda argv, timeout: ExecResult(0, "", ""), 4, 60)


def test_only_a_built_in_lead_that_stays_up_is_waited_for_inside() -> None:
    def spec(interactive: bool, flavour: str) -> dict[str, object]:
        containers = [{"image": "x", **({} if interactive else {"command": "hostname"})}]
        flux = {"flavour": flavour}
        return {
            "metadata": {"name": "c"},
            "spec": {"size": 2, "interactive": interactive, "containers": containers, "flux": flux},
        }

    assert waits_inside(load_minicluster(spec(True, "builtin")))
    assert not waits_inside(load_minicluster(spec(False, "builtin")))
    assert not waits_inside(load_minicluster(spec(True, "flux")))
