"""Environment that loads the PMPI profiler into an unmodified MPI application.

The job option (`flux submit -o pmpi`, the spec field) and `minicluster profile` all come down to
these variables; keeping them in one place keeps the C library and its launchers in agreement.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

#: Variables a launcher must forward to remote ranks (e.g. `mpirun -x NAME` for each).
PMPI_VARIABLES = (
    "LD_PRELOAD",
    "MC_PMPI_DIR",
    "MC_PMPI_JOBID",
    "MC_PMPI_MAX_EVENTS",
    "MC_PMPI_ITERATIONS",
    "MC_PMPI_BOUNDARY",
    "MC_PMPI_TRACE",
    "MC_MPI_WAIT",
    "MC_MPI_WAIT_SPIN_US",
    "MC_MPI_WAIT_NAP_US",
    "MC_MPI_WAIT_SLICE_US",
    "MC_MPI_WAIT_EVENTS",
    "MC_MPI_WAIT_STATS",
)

#: The wait mode's tuning knobs (mc_wait.h, mc_wake.h): taken from a job's own environment when it asks for a wait
#: mode, so `MC_MPI_WAIT_SLICE_US=100 flux submit -o mpi-wait=sleep ...` reaches ranks on every pod.
WAIT_TUNING = (
    "MC_MPI_WAIT_SPIN_US",
    "MC_MPI_WAIT_NAP_US",
    "MC_MPI_WAIT_SLICE_US",
    "MC_MPI_WAIT_EVENTS",
    "MC_MPI_WAIT_STATS",
)

SPIN_US_MAX = 1_000_000
"""The longest spin a wait may be given (`--mpi-spin-us`, MC_MPI_WAIT_SPIN_US): one second of polling is already
Open MPI's own way for any solver that synchronises more often than that."""
#: Each knob's accepted whole numbers (mc_wait.h, mc_wake.h read them with strtoull).
WAIT_TUNING_RANGES: dict[str, tuple[int, int]] = {
    "MC_MPI_WAIT_SPIN_US": (0, SPIN_US_MAX),
    "MC_MPI_WAIT_NAP_US": (1, 1_000_000),
    "MC_MPI_WAIT_SLICE_US": (0, 100_000),
    "MC_MPI_WAIT_EVENTS": (0, 1),
    "MC_MPI_WAIT_STATS": (0, 1),
}


def wait_tuning_error(name: str, value: str) -> str | None:
    """Why a wait knob's value is refused (naming it and its range), or None when it is a whole number in range:
    the C library would read a bad one as 0 without a word."""
    low, high = WAIT_TUNING_RANGES[name]
    text = value.strip()
    if not text.isdigit() or not low <= int(text) <= high:
        return f"{name}={value!r}: expected a whole number from {low} to {high}"
    return None


#: How a rank waits inside MPI (mc_wait.h): Open MPI's polling, or sleeping between polls.
WAIT_MODES = ("poll", "sleep")


def _preloaded(library: Path | str, env: dict[str, str]) -> None:
    """Put the library first in LD_PRELOAD, so it wins over other preloads."""
    lib = str(Path(library).resolve())
    preload = [p for p in env.get("LD_PRELOAD", "").replace(":", " ").split() if p and p != lib]
    env["LD_PRELOAD"] = " ".join([lib, *preload])


def wait_environment(library: Path | str, mode: str, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """A copy of `base` with the library preloaded for its wait mode only (no trace is recorded)."""
    if mode not in WAIT_MODES:
        raise ValueError(f"wait mode {mode!r}: expected one of {', '.join(WAIT_MODES)}")
    env = dict(os.environ if base is None else base)
    _preloaded(library, env)
    env["MC_PMPI_TRACE"] = "0"
    env["MC_MPI_WAIT"] = mode
    return env


def pmpi_environment(
    library: Path | str,
    trace_dir: Path | str,
    *,
    jobid: str | None = None,
    iterations: int | None = None,
    boundary_call: str | None = None,
    max_events: int | None = None,
    wait: str | None = None,
    base: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """A copy of `base` (default: os.environ) with the profiler preloaded and configured.

    The library goes first in LD_PRELOAD so it wins over other preloads; `iterations` makes each
    rank write its trace after that many boundary calls instead of at MPI_Finalize.
    """
    env = dict(os.environ if base is None else base)
    _preloaded(library, env)
    env["MC_PMPI_DIR"] = str(Path(trace_dir).resolve())
    if jobid is not None:
        env["MC_PMPI_JOBID"] = jobid
    if iterations is not None:
        if iterations < 1:
            raise ValueError(f"iterations must be at least 1, got {iterations}")
        env["MC_PMPI_ITERATIONS"] = str(iterations)
    if boundary_call is not None:
        env["MC_PMPI_BOUNDARY"] = boundary_call
    if max_events is not None:
        env["MC_PMPI_MAX_EVENTS"] = str(max_events)
    if wait is not None:
        if wait not in WAIT_MODES:
            raise ValueError(f"wait mode {wait!r}: expected one of {', '.join(WAIT_MODES)}")
        env["MC_MPI_WAIT"] = wait
    return env
