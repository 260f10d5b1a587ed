"""The library's sleep wait mode for real: every replaced MPI call still gives the right result, and a rank
waiting in MPI_Barrier uses almost no CPU while its peers are busy elsewhere (what multiplexing reclaims)."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from elasticity.pmpi.env import pmpi_environment, wait_environment
from elasticity.profiling.duty_cycle import analyze_job
from elasticity.profiling.trace import read_job_traces

DATA = Path(__file__).parent / "data"
MPIRUN_TIMEOUT = 90.0
LINE = re.compile(r"WAIT_CALLS rank=(\d+) ok=1(?: idle_wait_cpu_s=([\d.]+) idle_wait_wall_s=([\d.]+))?")
IDLE_MS = 1500


@pytest.fixture(scope="module")
def wait_calls(compile_mpi: Callable[[str], Path]) -> Path:
    return compile_mpi("wait_calls")


def _run(program: Path, env: dict[str, str], np: int = 3) -> dict[int, tuple[float, float] | None]:
    proc = subprocess.run(
        ["mpirun", "-np", str(np), "--oversubscribe", str(program), str(IDLE_MS)],
        env=env, capture_output=True, text=True, timeout=MPIRUN_TIMEOUT, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = {}
    for match in LINE.finditer(proc.stdout):
        rank, cpu, wall = match.groups()
        found[int(rank)] = (float(cpu), float(wall)) if cpu else None
    assert sorted(found) == list(range(np)), proc.stdout
    return found


@pytest.mark.serial
def test_every_replaced_call_gives_the_right_result_and_a_waiting_rank_sleeps(
    wait_calls: Path, pmpi_library: Path, mpi_environment: dict[str, str]
) -> None:
    polling = _run(wait_calls, {**mpi_environment, "OMPI_MCA_mpi_yield_when_idle": "0"})
    sleeping = _run(wait_calls, wait_environment(pmpi_library, "sleep", base=mpi_environment))
    poll_cpu, poll_wall = polling[0] or (0.0, 0.0)
    sleep_cpu, sleep_wall = sleeping[0] or (0.0, 0.0)
    assert poll_wall >= IDLE_MS / 1000 * 0.9 and sleep_wall >= IDLE_MS / 1000 * 0.9
    # Open MPI's own wait polls for the whole 1.5 s (less whatever the busy machine took from it) ...
    assert poll_cpu > 0.3 * poll_wall, polling
    # ... the sleeping wait wakes a few thousand times for microseconds each
    assert sleep_cpu < 0.1 * sleep_wall, sleeping
    assert sleep_cpu < poll_cpu / 3


@pytest.mark.serial
def test_an_explicit_poll_mode_leaves_waiting_to_open_mpi(
    wait_calls: Path, pmpi_library: Path, mpi_environment: dict[str, str]
) -> None:
    env = wait_environment(pmpi_library, "poll", base={**mpi_environment, "OMPI_MCA_mpi_yield_when_idle": "0"})
    cpu, wall = _run(wait_calls, env)[0] or (0.0, 0.0)
    assert cpu > 0.3 * wall


@pytest.mark.serial
def test_sleeping_waits_are_still_profiled(
    spin_program: Path, pmpi_library: Path, tmp_path: Path, mpi_environment: dict[str, str]
) -> None:
    """Wait mode and profiler in one library: the duty cycles come out as without it."""
    env = pmpi_environment(pmpi_library, tmp_path, jobid="w", wait="sleep", base=mpi_environment)
    proc = subprocess.run(
        ["mpirun", "-np", "3", "--oversubscribe", str(spin_program), "8", "4000", "-1", "sleep"],
        env=env, capture_output=True, text=True, timeout=MPIRUN_TIMEOUT, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    analysis = analyze_job(read_job_traces(tmp_path, jobid="w"))
    assert analysis.iterations == (8, 8, 8)
    assert analysis.duty[0] < analysis.duty[1] < analysis.duty[2]  # rank r sleeps (r+1) units per iteration


def test_unknown_wait_modes_are_refused(pmpi_library: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="wait mode 'spin'"):
        wait_environment(pmpi_library, "spin")
    with pytest.raises(ValueError, match="wait mode 'nap'"):
        pmpi_environment(pmpi_library, tmp_path, wait="nap")
