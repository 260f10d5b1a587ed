"""The malleable Jacobi solver: a real MPI job resized by checkpoint and restart ends with a rigid run's answer."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from broker.testing import LOOPBACK_MPI_ENV, wait_for
from elasticity.workloads.malleable_jacobi import (
    CHECKPOINT_HEADER,
    CHECKPOINT_MAGIC,
    CHECKPOINT_VERSION,
    CheckpointHeader,
    JacobiStatus,
    build_malleable_jacobi,
    jacobi_arguments,
    read_answer,
    read_checkpoint_header,
    read_progress,
    read_status,
)

GRID = 40
ITERATIONS = 300
MPIRUN_TIMEOUT = 60.0


def _env() -> dict[str, str]:
    """Open MPI on loopback, as root, oversubscribed (conftest's mpi_env, here for the module-scoped fixtures)."""
    return {**os.environ, **LOOPBACK_MPI_ENV, "OMPI_MCA_rmaps_base_oversubscribe": "1"}


@pytest.fixture(scope="module")
def jacobi(tmp_path_factory: pytest.TempPathFactory) -> Path:
    for tool in ("mpicc", "mpirun"):
        if shutil.which(tool) is None:
            reason = f"{tool} not installed (Debian: openmpi-bin libopenmpi-dev)"
            if os.environ.get("CI"):
                pytest.fail(f"{reason} — `make test` should have installed it")
            pytest.skip(reason)
    return build_malleable_jacobi(tmp_path_factory.mktemp("jacobi"))


def _command(program: Path, ranks: int, args: Sequence[str]) -> list[str]:
    return ["mpirun", "-np", str(ranks), "--oversubscribe", "--bind-to", "none", str(program), *args]


def _run(program: Path, ranks: int, args: Sequence[str]) -> subprocess.CompletedProcess[str]:
    cmd = _command(program, ranks, args)
    return subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=MPIRUN_TIMEOUT, check=False)


def _run_signalled(program: Path, ranks: int, args: Sequence[str], state: Path, after: int) -> tuple[str, str]:
    """Run the job and send SIGUSR1 to mpirun (which forwards it to the ranks) once `after` iterations are done."""
    cmd = _command(program, ranks, args)
    proc = subprocess.Popen(cmd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: read_progress(state) >= after or proc.poll() is not None, timeout=MPIRUN_TIMEOUT)
        proc.send_signal(signal.SIGUSR1)
        out, err = proc.communicate(timeout=MPIRUN_TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    return out, err


@pytest.fixture(scope="module")
def rigid_answer(jacobi: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The answer of one uninterrupted run on 2 ranks."""
    state = tmp_path_factory.mktemp("rigid")
    result = _run(jacobi, 2, jacobi_arguments(GRID, ITERATIONS, state))
    assert result.returncode == 0, result.stderr
    answer = read_answer(state)
    assert answer is not None and f"answer {answer} ranks 2" in result.stdout
    assert (state / "answer").read_text() == f"fnv1a64 {answer}\niterations {ITERATIONS}\ngrid {GRID}\n"
    assert read_status(state) == JacobiStatus("done", ITERATIONS)
    assert read_progress(state) == ITERATIONS
    return answer


@pytest.mark.parametrize("ranks", [1, 3])
def test_the_answer_does_not_depend_on_the_rank_count(
    jacobi: Path, rigid_answer: str, ranks: int, tmp_path: Path
) -> None:
    result = _run(jacobi, ranks, jacobi_arguments(GRID, ITERATIONS, tmp_path))
    assert result.returncode == 0, result.stderr
    assert read_answer(tmp_path) == rigid_answer
    assert f"answer {rigid_answer} ranks {ranks}" in result.stdout


def test_a_job_resized_twice_by_checkpoint_and_restart_gives_the_rigid_answer(
    jacobi: Path, rigid_answer: str, tmp_path: Path
) -> None:
    # 3 ranks, paced (5 ms an iteration) so the signal lands mid-run: checkpoint at K
    paced = jacobi_arguments(GRID, ITERATIONS, tmp_path, pace_ms=15.0)
    out, _ = _run_signalled(jacobi, 3, paced, tmp_path, after=30)
    status = read_status(tmp_path)
    assert status.kind == "checkpoint" and 0 < status.iterations < ITERATIONS, status
    first = status.iterations
    assert f"checkpoint {first} ranks 3" in out
    assert read_checkpoint_header(tmp_path) == CheckpointHeader(GRID, first, ITERATIONS)
    assert read_answer(tmp_path) is None

    # shrunk to 1 rank (15 ms an iteration), signalled again some iterations later: checkpoint at K2
    out, _ = _run_signalled(jacobi, 1, paced, tmp_path, after=first + 20)
    assert f"restart {first} ranks 1" in out
    status = read_status(tmp_path)
    assert status.kind == "checkpoint" and first < status.iterations < ITERATIONS, status
    second = status.iterations
    assert f"checkpoint {second} ranks 1" in out

    # grown to 4 ranks, unpaced, to the end
    result = _run(jacobi, 4, jacobi_arguments(GRID, ITERATIONS, tmp_path))
    assert result.returncode == 0, result.stderr
    assert f"restart {second} ranks 4" in result.stdout
    assert read_status(tmp_path) == JacobiStatus("done", ITERATIONS)
    assert read_answer(tmp_path) == rigid_answer
    assert f"answer {rigid_answer} ranks 4" in result.stdout


def _iteration_seconds(program: Path, ranks: int, args: Sequence[str], state: Path, iterations: int) -> float:
    """Wall time from the first iteration's progress to the last's (MPI's start-up and shut-down left out)."""
    proc = subprocess.Popen(
        _command(program, ranks, args), env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    first = last = None
    try:
        deadline = time.monotonic() + MPIRUN_TIMEOUT
        while last is None and proc.poll() is None and time.monotonic() < deadline:
            done, now = read_progress(state), time.monotonic()
            if first is None and done >= 1:
                first = now
            if done >= iterations:
                last = now
            time.sleep(0.003)  # sleep: the sampling pace of the progress timestamps (3 ms resolution)
        _, err = proc.communicate(timeout=MPIRUN_TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert first is not None and last is not None, "progress was not seen moving from 1 to the end"
    return last - first


@pytest.mark.serial
def test_pacing_makes_the_run_time_follow_amdahls_law(jacobi: Path, tmp_path: Path) -> None:
    iterations, pace_ms = 100, 30.0  # iterations 1..100 are 99 paced iterations apart

    def seconds(ranks: int, serial_fraction: float) -> float:
        state = tmp_path / f"p{ranks}-s{serial_fraction}"
        args = jacobi_arguments(16, iterations, state, pace_ms=pace_ms, serial_fraction=serial_fraction)
        return _iteration_seconds(jacobi, ranks, args, state, iterations)

    one = seconds(1, 0.0)
    four = seconds(4, 0.0)
    half_serial = seconds(4, 0.5)
    floor = (iterations - 1) * pace_ms / 1000
    assert one >= 0.95 * floor, one  # an iteration never ends before its paced time
    assert four < 0.6 * one, (one, four)  # ideally a quarter
    assert half_serial >= 0.95 * floor * (0.5 + 0.5 / 4), half_serial  # ideally 0.625 of one rank's time
    assert half_serial > four, (four, half_serial)


def test_a_checkpoint_of_another_grid_is_refused(jacobi: Path, tmp_path: Path) -> None:
    header = CHECKPOINT_HEADER.pack(CHECKPOINT_MAGIC, CHECKPOINT_VERSION, 24, 10, ITERATIONS)
    (tmp_path / "checkpoint").write_bytes(header + bytes(24 * 24 * 8))
    assert read_checkpoint_header(tmp_path) == CheckpointHeader(24, 10, ITERATIONS)
    result = _run(jacobi, 2, jacobi_arguments(GRID, ITERATIONS, tmp_path))
    assert result.returncode == 2, result.stderr
    assert f"grid 24, not --grid {GRID}" in result.stderr
    assert read_status(tmp_path) == JacobiStatus("none", 0)


def test_bad_arguments_exit_2_naming_the_flag(jacobi: Path, tmp_path: Path) -> None:
    state = str(tmp_path / "state")
    result = _run(jacobi, 1, ["--grid", "8", "--iterations", "5", "--state", state, "--pace-ms", "fast"])
    assert result.returncode == 2 and "--pace-ms" in result.stderr, result.stderr
    result = _run(jacobi, 1, ["--grid", "8", "--iterations", "5", "--state", state, "--ranks", "4"])
    assert result.returncode == 2 and "unknown flag --ranks" in result.stderr, result.stderr
    (tmp_path / "file").write_text("")
    unwritable = tmp_path / "file" / "state"  # under a regular file: unwritable even for root
    result = _run(jacobi, 1, jacobi_arguments(8, 5, unwritable))
    assert result.returncode == 2 and str(unwritable) in result.stderr, result.stderr
    with pytest.raises(ValueError, match="grid"):
        jacobi_arguments(0, 5, state)
    with pytest.raises(ValueError, match="serial_fraction"):
        jacobi_arguments(8, 5, state, serial_fraction=1.5)
    with pytest.raises(ValueError, match="signal"):
        jacobi_arguments(8, 5, state, signal="SIGKILL")
    assert jacobi_arguments(8, 5, state, signal="USR2")[-2:] == ["--signal", "SIGUSR2"]


def test_an_empty_state_directory_reads_as_not_started(tmp_path: Path) -> None:
    assert read_status(tmp_path) == JacobiStatus("none", 0)
    assert read_answer(tmp_path) is None
    assert read_progress(tmp_path) == 0
    assert read_checkpoint_header(tmp_path) is None
    (tmp_path / "status").write_text("running\n")
    with pytest.raises(ValueError, match="status"):
        read_status(tmp_path)
