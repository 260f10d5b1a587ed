"""`minicluster pmpi build` and `minicluster profile` on a real MPI program."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

MINICLUSTER = str(Path(sys.executable).with_name("minicluster"))


def test_pmpi_build_prints_a_loadable_library(tmp_path: Path) -> None:
    proc = subprocess.run(
        [MINICLUSTER, "pmpi", "build", "--output-dir", str(tmp_path)], capture_output=True, text=True, timeout=180
    )
    assert proc.returncode == 0, proc.stderr
    library = Path(proc.stdout.strip())
    assert library.parent == tmp_path and library.exists()
    symbols = subprocess.run(["nm", "-D", "--defined-only", str(library)], capture_output=True, text=True).stdout
    for call in ("MPI_Barrier", "MPI_Allreduce", "MPI_Alltoall", "MPI_Sendrecv", "MPI_Wait", "MPI_Waitall"):
        assert f" T {call}\n" in symbols


def test_pmpi_build_names_a_missing_compiler(tmp_path: Path) -> None:
    proc = subprocess.run(
        [MINICLUSTER, "pmpi", "build", "--output-dir", str(tmp_path), "--mpicc", "no-such-mpicc"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode != 0 and "no-such-mpicc" in proc.stderr


def test_profile_runs_the_program_and_proposes_requests(
    tmp_path: Path, spin_program: Path, mpi_environment: dict[str, str]
) -> None:
    plot = tmp_path / "profile.png"
    env = dict(mpi_environment, COLUMNS="200")
    command = ["mpirun", "-np", "4", "--oversubscribe", str(spin_program), "20", "3000", "-1", "sleep"]
    proc = subprocess.run(
        [MINICLUSTER, "profile", "--plot", str(plot), "--", *command],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert "MC_SELF rank=3" in proc.stdout  # the program's own output is passed through
    assert "duty" in proc.stdout.lower() and "m" in proc.stdout
    assert plot.exists() and plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_profile_rejects_both_or_neither_source(tmp_path: Path) -> None:
    neither = subprocess.run([MINICLUSTER, "profile"], capture_output=True, text=True, timeout=60)
    assert neither.returncode == 2 and "either a COMMAND" in neither.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = subprocess.run([MINICLUSTER, "profile", "--traces", str(empty)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "minicluster profile:" in proc.stderr


def test_profile_writes_traces_where_asked_and_runs_as_root_without_opt_ins(
    tmp_path: Path, spin_program: Path, mpi_environment: dict[str, str]
) -> None:
    """docs/profiling.md's first block: one run into --traces DIR, then a second analysis of the same DIR; as root
    mpirun needs Open MPI's opt-in, which `profile` gives it as the application image does."""
    env = {k: v for k, v in mpi_environment.items() if not k.startswith("OMPI_ALLOW_RUN_AS_ROOT")}
    traces = tmp_path / "traces"
    command = ["mpirun", "-np", "2", "--oversubscribe", str(spin_program), "20", "3000", "-1", "sleep"]
    run = subprocess.run(
        [MINICLUSTER, "profile", "--traces", str(traces), "--plot", str(tmp_path / "a.png"), "--", *command],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr
    assert sorted(p.name for p in traces.iterdir()) and (tmp_path / "a.png").exists()
    again = subprocess.run(
        [MINICLUSTER, "profile", "--traces", str(traces), "--budget", "4000", "--plot", str(tmp_path / "b.png")],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert again.returncode == 0 and "4000" in again.stdout, again.stderr
