"""A rank sleeping inside MPI wakes when its message arrives (mc_wake.h), not when a timed nap happens to end,
and a socket nobody drains does not turn its sleep into a spin."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from elasticity.pmpi.env import wait_environment

DATA = Path(__file__).parent / "data"
ROUNDS = 300
LINE = re.compile(r"WAKE median_us=([\d.]+) p90_us=([\d.]+) wait_cpu_s=([\d.]+) wait_wall_s=([\d.]+) slice_ns=(-?\d+)")


@pytest.fixture(scope="module")
def wake_latency(compile_mpi: Callable[[str], Path]) -> Path:
    return compile_mpi("wake_latency")


def _run(program: Path, env: dict[str, str], *args: str) -> dict[str, float]:
    proc = subprocess.run(
        ["mpirun", "-np", "2", "--oversubscribe", "--bind-to", "none", str(program), str(ROUNDS), *args],
        env=env, capture_output=True, text=True, timeout=90, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    match = LINE.search(proc.stdout)
    assert match is not None, proc.stdout
    median, p90, cpu, wall, slice_ns = (float(g) for g in match.groups())
    return {"median_us": median, "p90_us": p90, "cpu_s": cpu, "wall_s": wall, "slice_ns": slice_ns}


def _sleeping(library: Path, base: dict[str, str], events: bool, **extra: str) -> dict[str, str]:
    env = wait_environment(library, "sleep", base={**base, "OMPI_MCA_btl": "tcp,self"})
    env["MC_MPI_WAIT_EVENTS"] = "1" if events else "0"
    return {**env, **extra}


def _kernel_slice_ns() -> int | None:
    """This process's EEVDF slice, when the kernel shows one (Linux 6.6+)."""
    try:
        text = Path("/proc/thread-self/sched").read_text()
    except OSError:
        return None
    found = re.search(r"^se\.slice\s*:\s*(\d+)", text, re.MULTILINE)
    return int(found.group(1)) if found else None


@pytest.mark.serial
def test_a_message_wakes_the_sleeping_rank_sooner_than_timed_naps(
    wake_latency: Path, pmpi_library: Path, mpi_environment: dict[str, str]
) -> None:
    timed = _run(wake_latency, _sleeping(pmpi_library, mpi_environment, events=False))
    woken = _run(wake_latency, _sleeping(pmpi_library, mpi_environment, events=True))
    # Waits of 1..8 ms at random: timed naps see a message up to a growing nap late; a watched socket at once.
    assert woken["median_us"] < timed["median_us"] / 2, (timed, woken)
    assert woken["p90_us"] < timed["p90_us"], (timed, woken)
    # and waking on messages is still sleeping: the receiver's CPU stays a small part of its wall time
    assert woken["cpu_s"] < 0.15 * woken["wall_s"], woken


@pytest.mark.serial
def test_a_socket_nobody_reads_does_not_make_the_wait_spin(
    wake_latency: Path, pmpi_library: Path, mpi_environment: dict[str, str]
) -> None:
    stuck = _run(wake_latency, _sleeping(pmpi_library, mpi_environment, events=True), "stuck")
    assert stuck["wall_s"] >= ROUNDS * 0.001
    assert stuck["cpu_s"] < 0.25 * stuck["wall_s"], stuck


def test_a_sleeping_rank_takes_the_slice_it_is_told_and_otherwise_keeps_the_default(
    wake_latency: Path, pmpi_library: Path, mpi_environment: dict[str, str]
) -> None:
    default = _kernel_slice_ns()
    if default is None:
        pytest.skip("this kernel shows no EEVDF slice in /proc/thread-self/sched")
    short = _run(wake_latency, _sleeping(pmpi_library, mpi_environment, events=True, MC_MPI_WAIT_SLICE_US="100"))
    if short["slice_ns"] == default:
        pytest.skip(f"this kernel keeps every task at its {default} ns slice (custom slices: Linux 6.12+)")
    chosen = _run(wake_latency, _sleeping(pmpi_library, mpi_environment, events=True, MC_MPI_WAIT_SLICE_US="250"))
    kept = _run(wake_latency, _sleeping(pmpi_library, mpi_environment, events=True))
    polling = _run(
        wake_latency, {**wait_environment(pmpi_library, "poll", base=mpi_environment), "MC_MPI_WAIT_SLICE_US": "100"}
    )
    assert short["slice_ns"] == 100_000
    assert chosen["slice_ns"] == 250_000
    assert kept["slice_ns"] == polling["slice_ns"] == default  # unset, and the poll mode, leave the slice alone
