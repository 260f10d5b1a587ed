"""Waiting for the brokers inside the lead (ready.py): the in-pod script's answer in a real instance, and the
fall back to status reads with one log line when it cannot tell."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

from miniclusters.api import load_minicluster
from miniclusters.backends.base import BackendError, ExecResult
from miniclusters.backends.overlay import overlay_ranks
from miniclusters.backends.podman.ready import WAIT_FOR_BROKERS, await_brokers, waits_inside

FLUX = str(Path(sys.executable).with_name("flux"))


def _wait_in_instance(size: int, seconds: int) -> subprocess.CompletedProcess[str]:
    """The in-lead wait run inside a real 2-broker instance of ours (`flux start`), given its socket."""
    script = 'exec "$0" -c "$1" "$2" "$3" "${FLUX_URI#local://}"'
    argv = [
        FLUX,
        "start",
        "--test-size=2",
        "sh",
        "-c",
        script,
        sys.executable,
        WAIT_FOR_BROKERS,
        str(size),
        str(seconds),
    ]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


def test_the_in_lead_wait_ends_when_every_rank_is_up_and_says_which() -> None:
    done = _wait_in_instance(2, 60)
    assert done.returncode == 0, done.stderr
    assert overlay_ranks(ExecResult(0, done.stdout, "")) == ((0, 1), ())  # what the status read then reuses


def test_the_in_lead_wait_gives_up_after_its_seconds_while_a_rank_is_missing() -> None:
    assert _wait_in_instance(3, 1).returncode == 1


def test_the_in_lead_wait_looks_for_the_socket_until_it_is_made(tmp_path: Path) -> None:
    argv = [sys.executable, "-c", WAIT_FOR_BROKERS, "1", "1", str(tmp_path / "not-yet")]
    assert subprocess.run(argv, capture_output=True, timeout=60, check=False).returncode == 1


def test_a_wait_that_cannot_tell_falls_back_with_one_log_line(caplog: pytest.LogCaptureFixture) -> None:
    def refused(argv: list[str], timeout: float) -> ExecResult:
        raise BackendError("pod c-0 (index 0) is not running")

    with caplog.at_level(logging.WARNING):
        assert await_brokers(refused, 4, 60) is None
        assert await_brokers(lambda argv, timeout: ExecResult(1, "", ""), 4, 60) is None
        assert await_brokers(lambda argv, timeout: ExecResult(0, "not json", ""), 4, 60) is None
    assert len(caplog.records) == 3 and all("reading the status instead" in r.message for r in caplog.records)
    answer = '{"ranks": [{"rank": 0, "state": "up"}, {"rank": 1, "state": "up"}, {"rank": 2, "state": "lost"}]}'
    assert await_brokers(lambda argv, timeout: ExecResult(0, answer, ""), 2, 60) == ((0, 1), (2,))


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
