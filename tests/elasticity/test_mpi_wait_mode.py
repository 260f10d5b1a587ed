"""The library's sleep wait mode for real: every replaced MPI call still gives the right result, and a rank
waiting in MPI_Barrier uses almost no CPU while its peers are busy elsewhere (what multiplexing reclaims)."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest

from elasticity.pmpi.env import pmpi_environment, wait_environment
from elasticity.profiling.duty_cycle import analyze_job
from elasticity.profiling.trace import read_job_traces

DATA = Path(__file__).parent / "data"
MPIRUN_TIMEOUT = 90.0
LINE = re.compile(
    r"WAIT_CALLS rank=(\d+) ok=1"
    r"(?: idle_wait_cpu_s=([\d.]+) idle_wait_wall_s=([\d.]+) idle_wait_runnable_s=(-?[\d.]+))?"
)
IDLE_MS = 1500
SELF_RE = re.compile(r"MC_SELF rank=(\d+) iterations=(\d+) spin_s=([\d.]+) span_s=([\d.]+)")


@pytest.fixture(scope="module")
def wait_calls(compile_mpi: Callable[[str], Path]) -> Path:
    return compile_mpi("wait_calls")


class Wait(NamedTuple):
    """Rank 0's idle wait: CPU used, wall time, and how long its thread was runnable (on a CPU or queued for one).

    A polling wait is runnable for its whole wall time whatever else the machine runs; the CPU it gets is what the
    cores can spare (CI's 2 cores, shared with other tests, gave it well under a third at times)."""

    cpu: float
    wall: float
    runnable: float


def _wanted(wait: Wait) -> float:
    """The CPU the wait asked for: its runnable time, or (a kernel without schedstat) at least what it got."""
    return wait.runnable if wait.runnable >= 0 else wait.cpu


def _run(program: Path, env: dict[str, str], np: int = 3) -> dict[int, Wait | None]:
    proc = subprocess.run(
        ["mpirun", "-np", str(np), "--oversubscribe", str(program), str(IDLE_MS)],
        env=env, capture_output=True, text=True, timeout=MPIRUN_TIMEOUT, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = {}
    for match in LINE.finditer(proc.stdout):
        rank, cpu, wall, runnable = match.groups()
        found[int(rank)] = Wait(float(cpu), float(wall), float(runnable)) if cpu else None
    assert sorted(found) == list(range(np)), proc.stdout
    return found


@pytest.mark.serial
def test_every_replaced_call_gives_the_right_result_and_a_waiting_rank_sleeps(
    wait_calls: Path, pmpi_library: Path, mpi_environment: dict[str, str]
) -> None:
    polling = _run(wait_calls, {**mpi_environment, "OMPI_MCA_mpi_yield_when_idle": "0"})
    sleeping = _run(wait_calls, wait_environment(pmpi_library, "sleep", base=mpi_environment))
    poll, sleep = polling[0], sleeping[0]
    assert poll is not None and sleep is not None
    assert poll.wall >= IDLE_MS / 1000 * 0.9 and sleep.wall >= IDLE_MS / 1000 * 0.9
    # Open MPI's own wait polls: it wants a CPU for the whole 1.5 s (it was asserted to get a third of it, which a
    # busy machine did not always give: 0.44 s of 1.52 s in one run) ...
    assert _wanted(poll) > 0.8 * poll.wall, polling
    # ... the sleeping wait wakes a few thousand times for microseconds each
    assert sleep.cpu < 0.1 * sleep.wall, sleeping
    assert sleep.cpu < _wanted(poll) / 3


@pytest.mark.serial
def test_an_explicit_poll_mode_leaves_waiting_to_open_mpi(
    wait_calls: Path, pmpi_library: Path, mpi_environment: dict[str, str]
) -> None:
    env = wait_environment(pmpi_library, "poll", base={**mpi_environment, "OMPI_MCA_mpi_yield_when_idle": "0"})
    wait = _run(wait_calls, env)[0]
    assert wait is not None and _wanted(wait) > 0.8 * wait.wall, wait


@pytest.mark.serial
def test_sleeping_waits_are_still_profiled(
    spin_program: Path, pmpi_library: Path, tmp_path: Path, mpi_environment: dict[str, str]
) -> None:
    """Wait mode and profiler in one library: the duty cycles come out as without it.

    Rank r sleeps (r+1) x 20 ms per iteration. Asserted are what the scheduler cannot move: the profiler against
    each rank's own clock (MC_SELF), and the median iteration's split (a late wake-up in one iteration, common on
    a busy machine, moves a mean, and the ordering of means of 4 ms units was once luck)."""
    env = pmpi_environment(pmpi_library, tmp_path, jobid="w", wait="sleep", base=mpi_environment)
    proc = subprocess.run(
        ["mpirun", "-np", "3", "--oversubscribe", str(spin_program), "8", "20000", "-1", "sleep"],
        env=env, capture_output=True, text=True, timeout=MPIRUN_TIMEOUT, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    traces = read_job_traces(tmp_path, jobid="w")
    analysis = analyze_job(traces)
    assert analysis.iterations == (8, 8, 8)
    own = {int(m[1]): float(m[3]) / float(m[4]) for m in SELF_RE.finditer(proc.stdout)}
    assert sorted(own) == [0, 1, 2], proc.stdout
    whole = analyze_job(traces, skip_fraction=0.0).duty
    assert all(abs(whole[r] - own[r]) < 0.03 for r in range(3)), (whole.tolist(), own)
    median = np.array([np.median(r.duty) for r in analysis.ranks])
    np.testing.assert_allclose(median / median[-1], [1 / 3, 2 / 3, 1], atol=0.07)


def test_unknown_wait_modes_are_refused(pmpi_library: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="wait mode 'spin'"):
        wait_environment(pmpi_library, "spin")
    with pytest.raises(ValueError, match="wait mode 'nap'"):
        pmpi_environment(pmpi_library, tmp_path, wait="nap")


STATS = re.compile(
    r"MC_WAIT rank=0 mode=sleep waits=(\d+) napped=(\d+) naps=(\d+) woken=(\d+) wait_us=(\d+) nap_us=(\d+)"
)
MESSAGES = 40


def _rank0_waits(program: Path, library: Path, base: dict[str, str], delay_us: int, spin_us: int) -> dict[str, int]:
    """Rank 0's wait statistics (MC_MPI_WAIT_STATS=1) for MESSAGES receives, each DELAY_US after the last."""
    env = {**wait_environment(library, "sleep", base=base), "MC_MPI_WAIT_STATS": "1"}
    env["MC_MPI_WAIT_SPIN_US"] = str(spin_us)
    proc = subprocess.run(
        ["mpirun", "-np", "2", "--oversubscribe", str(program), str(delay_us), str(MESSAGES)],
        env=env, capture_output=True, text=True, timeout=MPIRUN_TIMEOUT, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    match = STATS.search(proc.stderr)
    assert match is not None, proc.stderr[-2000:]
    keys = ("waits", "napped", "naps", "woken", "wait_us", "nap_us")
    return dict(zip(keys, map(int, match.groups()), strict=True))


def test_waits_shorter_than_the_spin_never_nap_and_longer_ones_sleep(
    compile_mpi: Callable[[str], Path], pmpi_library: Path, mpi_environment: dict[str, str]
) -> None:
    """MC_MPI_WAIT_SPIN_US (`minicluster multiplex --mpi-spin-us`): a wait that ends within the spin completes by
    polling, without paying a wake-up; without a spin many of the same waits sleep; waits far longer than the spin
    sleep. Counted by the library itself, not timed."""
    program = compile_mpi("spin_then_sleep")
    receives = MESSAGES + 1  # and the barrier's wait
    spun = _rank0_waits(program, pmpi_library, mpi_environment, delay_us=1000, spin_us=500_000)
    assert spun["waits"] >= receives and spun["napped"] == 0 and spun["naps"] == 0, spun
    no_spin = _rank0_waits(program, pmpi_library, mpi_environment, delay_us=1000, spin_us=0)
    assert no_spin["napped"] >= MESSAGES // 4, no_spin  # the rest polled: their call's prediction was short
    long_waits = _rank0_waits(program, pmpi_library, mpi_environment, delay_us=20_000, spin_us=100)
    assert long_waits["napped"] >= MESSAGES // 2, long_waits
    assert long_waits["wait_us"] >= MESSAGES * 20_000 * 0.9, long_waits  # they were long


def test_a_malformed_spin_is_said_and_the_default_kept(
    compile_mpi: Callable[[str], Path], pmpi_library: Path, mpi_environment: dict[str, str]
) -> None:
    """The library read MC_MPI_WAIT_SPIN_US with strtoull: `20us` was 20 and `lots` 0, silently."""
    program = compile_mpi("spin_then_sleep")
    env = {**wait_environment(pmpi_library, "sleep", base=mpi_environment), "MC_MPI_WAIT_SPIN_US": "lots"}
    proc = subprocess.run(
        ["mpirun", "-np", "2", "--oversubscribe", str(program), "100", "3"],
        env=env, capture_output=True, text=True, timeout=MPIRUN_TIMEOUT, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "MC_MPI_WAIT_SPIN_US=lots is not a whole number from 0 to 1000000; spinning 20 us" in proc.stderr
