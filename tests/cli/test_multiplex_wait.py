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
    seen: list[tuple[str, int | None]] = []

    def opened(*args: Any) -> Any:
        seen.append((args[-2], args[-1]))
        raise click.UsageError("stopped by the test")

    monkeypatch.setattr(mux_cli, "open_backend", lambda *_a, **_k: _Pods())
    monkeypatch.setattr(mux_session, "open_session", opened)
    command = ["multiplex", "m", "--command", "proxy_solver 10 64 4 1,1,1,2"]
    assert CliRunner().invoke(main, [*command, "--mpi-wait", "poll"]).exit_code == 2
    assert CliRunner().invoke(main, command).exit_code == 2
    assert CliRunner().invoke(main, [*command, "--mpi-spin-us", "150"]).exit_code == 2
    assert seen == [("poll", None), ("sleep", None), ("sleep", 150)]


def test_the_spin_reaches_every_submitted_job_and_only_when_asked(tmp_path: Path) -> None:
    """`--mpi-spin-us N` travels as the job's MC_MPI_WAIT_SPIN_US (broker/modules/pmpi.py exports it to every
    rank); without it the library's default stays."""
    config = multiplex_config(_status(), {"max": 2}, 4, 2000)
    for spin, wanted in ((150, ["--env=MC_MPI_WAIT_SPIN_US=150"]), (None, [])):
        pods = _Pods()
        opened = mux_session.open_session(
            pods,  # type: ignore[arg-type]
            "kubernetes", "m", "proxy_solver 10 64 4 1,1,1,2", config, tmp_path, "MPI_Allreduce", "sleep", spin,
        )  # fmt: skip
        assert opened.simulations.submit("sim1", 50).ok
        assert [a for a in pods.ran[0] if "MC_MPI_WAIT_SPIN_US" in a] == wanted, pods.ran[0]
        assert "--env=OMPI_MCA_btl=tcp,self" in pods.ran[0]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--mpi-spin-us", "-1"], "Invalid value for '--mpi-spin-us': -1 is not in the range 0<=x<=1000000"),
        (["--mpi-spin-us", "2000000"], "Invalid value for '--mpi-spin-us': 2000000 is not in the range"),
        (["--mpi-spin-us", "100", "--mpi-wait", "poll"], "--mpi-spin-us: only with --mpi-wait sleep"),
    ],
)
def test_a_bad_spin_is_refused_naming_the_flag(monkeypatch: pytest.MonkeyPatch, args: list[str], said: str) -> None:
    pods = _Pods()
    monkeypatch.setattr(mux_cli, "open_backend", lambda *_a, **_k: pods)
    result = CliRunner().invoke(main, ["multiplex", "m", "--command", "proxy_solver 1", *args])
    assert result.exit_code == 2, result.output
    assert said in result.output
    assert pods.ran == []  # nothing was submitted


def test_a_wait_mode_that_is_neither_is_refused_naming_the_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    pods = _Pods()
    monkeypatch.setattr(mux_cli, "open_backend", lambda *_a, **_k: pods)
    result = CliRunner().invoke(main, ["multiplex", "m", "--command", "proxy_solver 1", "--mpi-wait", "spin"])
    assert result.exit_code == 2, result.output
    assert "'--mpi-wait'" in result.output and "'spin' is not one of 'sleep', 'poll'" in result.output
    assert pods.ran == []  # nothing was submitted
