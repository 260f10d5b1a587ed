"""`flux submit -o pmpi[=K]`: run a job's MPI ranks with the PMPI duty-cycle profiler preloaded.

Options: `pmpi` (1, or K: write traces after K iterations), `pmpi-dir` (where traces go; default
`<cwd>/pmpi-<jobid>`, so a shared working directory gathers every rank's trace), `pmpi-boundary` (the MPI
call that ends an iteration; default MPI_Barrier). No recompilation of the application.
"""

from __future__ import annotations

import os
from typing import Any

from ..protocol import EINVAL
from ..service import ServiceError


def pmpi_settings(shell_options: dict[str, Any], jobid: int, cwd: str) -> dict[str, Any] | None:
    """The profiling settings a job asked for (pure), or None; ServiceError names a bad option."""
    value = shell_options.get("pmpi")
    if value in (None, False, 0, "0", "false", "no"):
        return None
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
    return {"iterations": iterations, "dir": directory, "boundary": boundary}


def pmpi_variables(settings: dict[str, Any], jobid: int) -> dict[str, str]:
    """The variables that load and configure the profiler (building the library once, cached)."""
    from elasticity.pmpi.build import PmpiBuildError, build_pmpi_library
    from elasticity.pmpi.env import PMPI_VARIABLES, pmpi_environment

    try:
        library = build_pmpi_library()
    except PmpiBuildError as exc:
        raise ServiceError(EINVAL, f"-o pmpi: cannot build the profiler: {exc}") from None
    env = pmpi_environment(
        library,
        settings["dir"],
        jobid=str(jobid),
        iterations=settings["iterations"],
        boundary_call=settings["boundary"],
        base={},
    )
    return {k: v for k, v in env.items() if k in PMPI_VARIABLES}


def mpirun_exports(variables: dict[str, str]) -> list[str]:
    """`-x NAME=VALUE` for mpirun, so only the application ranks (not mpirun or orted) load the profiler."""
    return [arg for name, value in sorted(variables.items()) for arg in ("-x", f"{name}={value}")]
