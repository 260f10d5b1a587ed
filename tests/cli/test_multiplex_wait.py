"""`minicluster multiplex --mpi-wait`: how the simulations' ranks wait in MPI reaches every job the controller submits
(sleep by default), and a value that is neither is refused naming the flag before anything starts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from miniclusters.backends.base import ClusterStatus, ExecResult, PodStatus
from miniclusters.cli import main
from miniclusters.cli import multiplex_commands as mux_cli
from miniclusters.multiplex import session as mux_session
from miniclusters.multiplex.settings import multiplex_config


def _status() -> ClusterStatus:
    pods = tuple(PodStatus(index=i, name=f"m-{i}", phase="Running", ready=True) for i in range(2))
    return ClusterStatus(name="m", namespace="default", size=2, max_size=2, min_size=1, pods=pods)


class _Pods:
    """A backend whose lead pod answers `flux submit` with a job id and keeps every argv it was asked to run."""

    ephemeral = True

    def __init__(self) -> None:
        self.ran: list[list[str]] = []

    def status(self, _name: str) -> ClusterStatus:
        return _status()

    def exec(self, _name: str, _index: int, argv: list[str], timeout: float = 30) -> ExecResult:
        self.ran.append(argv)
        return ExecResult(0, "f2Jd5\n", "")


@pytest.mark.parametrize("wait", ["sleep", "poll"])
def test_every_submitted_job_asks_for_the_chosen_wait_mode(tmp_path: Path, wait: str) -> None:
    pods = _Pods()
    config = multiplex_config(_status(), {"max": 2}, 4, 2000)
    opened = mux_session.open_session(
        pods,  # type: ignore[arg-type]
        "kubernetes",
        "m",
        "proxy_solver 10 64 4 1,1,1,2",
        config,
        tmp_path,
        "MPI_Allreduce",
        wait,
    )
    assert opened.simulations.submit("sim1", 50).ok
    assert opened.simulations.submit("sim2", 0).ok
    for argv in pods.ran:
        assert argv[argv.index(f"mpi-wait={wait}") - 1] == "-o", argv
        assert not [a for a in argv if a.startswith("mpi-wait=") and a != f"mpi-wait={wait}"]
    assert "pmpi-boundary=MPI_Allreduce" in pods.ran[0]


def test_the_cli_passes_its_flag_and_sleeps_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []

    def opened(*args: Any) -> Any:
        seen.append(args[-1])
        raise click.UsageError("stopped by the test")

    monkeypatch.setattr(mux_cli, "open_backend", lambda *_a, **_k: _Pods())
    monkeypatch.setattr(mux_session, "open_session", opened)
    command = ["multiplex", "m", "--command", "proxy_solver 10 64 4 1,1,1,2"]
    assert CliRunner().invoke(main, [*command, "--mpi-wait", "poll"]).exit_code == 2
    assert CliRunner().invoke(main, command).exit_code == 2
    assert seen == ["poll", "sleep"]


def test_a_wait_mode_that_is_neither_is_refused_naming_the_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    pods = _Pods()
    monkeypatch.setattr(mux_cli, "open_backend", lambda *_a, **_k: pods)
    result = CliRunner().invoke(main, ["multiplex", "m", "--command", "proxy_solver 1", "--mpi-wait", "spin"])
    assert result.exit_code == 2, result.output
    assert "'--mpi-wait'" in result.output and "'spin' is not one of 'sleep', 'poll'" in result.output
    assert pods.ran == []  # nothing was submitted
