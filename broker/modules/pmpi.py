"""`flux submit -o pmpi[=K]`: run a job's MPI ranks with the PMPI duty-cycle profiler preloaded.

Options: `pmpi` (1, or K: write traces after K iterations), `pmpi-dir` (where traces go; default
`<cwd>/pmpi-<jobid>`, so a shared working directory gathers every rank's trace), `pmpi-boundary` (the MPI
call that ends an iteration; default MPI_Barrier). No recompilation of the application.

`mpi-wait=sleep` (or `poll`, Open MPI's own way) makes ranks waiting in MPI sleep instead of busy-polling, so
a waiting rank gives its core to the other simulations on the node (elasticity/pmpi/mc_wait.h); it preloads the
same library, tracing nothing unless `pmpi` is given too.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TypedDict

from elasticity.pmpi.env import WAIT_MODES

from ..jobs.shapes import ShellOptions
from ..protocol import EINVAL
from ..service import ServiceError


class PmpiSettings(TypedDict):
    """What a job asked of the profiler: iterations before traces are written (None: at the end), where they
    go and the MPI call that ends an iteration (None for both: no tracing, only the wait mode), the wait mode."""

    iterations: int | None
    dir: str | None
    boundary: str | None
    wait: str | None


def wait_mode(shell_options: ShellOptions) -> str | None:
    """`-o mpi-wait=MODE` (pure), or None; ServiceError names a bad value."""
    mode = shell_options.get("mpi-wait")
    if mode is None:
        return None
    if mode not in WAIT_MODES:
        raise ServiceError(EINVAL, f"-o mpi-wait={mode!r}: expected one of {', '.join(WAIT_MODES)}")
    return str(mode)


def pmpi_settings(shell_options: ShellOptions, jobid: int, cwd: str) -> PmpiSettings | None:
    """The profiling and wait settings a job asked for (pure), or None; ServiceError names a bad option."""
    wait = wait_mode(shell_options)
    value = shell_options.get("pmpi")
    if value in (None, False, 0, "0", "false", "no"):
        return None if wait is None else {"iterations": None, "dir": None, "boundary": None, "wait": wait}
    iterations: int | None = None
    if value not in (True, 1, "1", "true", "yes", ""):
        try:
            iterations = int(value)
        except (TypeError, ValueError):
            raise ServiceError(EINVAL, f"-o pmpi={value!r}: expected pmpi or pmpi=ITERATIONS") from None
        if iterations < 1:
            raise ServiceError(EINVAL, f"-o pmpi={value!r}: iterations must be at least 1")
    directory = str(shell_options.get("pmpi-dir") or os.path.join(cwd or os.getcwd(), f"pmpi-{jobid}"))
    boundary = shell_options.get("pmpi-boundary")
    if boundary is not None and not (isinstance(boundary, str) and boundary.startswith("MPI_")):
        raise ServiceError(EINVAL, f"-o pmpi-boundary={boundary!r}: expected an MPI call name such as MPI_Allreduce")
    return {"iterations": iterations, "dir": directory, "boundary": boundary, "wait": wait}


def pmpi_variables(
    settings: PmpiSettings,
    jobid: int,
    job_env: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The variables that load and configure the profiler (building the library once, cached), with the wait
    mode's tuning knobs the job's own environment sets (mpirun forwards only what it is given with -x)."""
    from elasticity.pmpi.build import PmpiBuildError, build_pmpi_library
    from elasticity.pmpi.env import (
        PMPI_VARIABLES,
        WAIT_TUNING,
        pmpi_environment,
        wait_environment,
        wait_tuning_error,
    )

    try:
        library = build_pmpi_library()
    except PmpiBuildError as exc:
        raise ServiceError(EINVAL, f"-o pmpi: cannot build the profiler: {exc}") from None
    if settings["dir"] is None:  # then a wait mode is set (pmpi_settings)
        env = wait_environment(library, str(settings["wait"]), base={})
    else:
        env = pmpi_environment(
            library,
            settings["dir"],
            jobid=str(jobid),
            iterations=settings["iterations"],
            boundary_call=settings["boundary"],
            wait=settings["wait"],
            base={},
        )
    variables = {k: v for k, v in env.items() if k in PMPI_VARIABLES}
    if settings["wait"] is not None and job_env:
        tuning = {k: job_env[k] for k in WAIT_TUNING if job_env.get(k)}
        for name, value in tuning.items():
            error = wait_tuning_error(name, value)
            if error is not None:
                raise ServiceError(EINVAL, f"-o mpi-wait: {error}")
        variables.update(tuning)
    return variables


def mpirun_exports(variables: dict[str, str]) -> list[str]:
    """`-x NAME=VALUE` for mpirun, so only the application ranks (not mpirun or orted) load the profiler."""
    return [arg for name, value in sorted(variables.items()) for arg in ("-x", f"{name}={value}")]
