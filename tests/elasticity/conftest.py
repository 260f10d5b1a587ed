"""Fixtures for the PMPI tests: the real library, a real MPI program, and a bounded mpirun."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from broker.testing import LOOPBACK_MPI_ENV
from elasticity.pmpi.build import build_pmpi_library
from elasticity.pmpi.env import pmpi_environment
from elasticity.workloads.openfoam import Case

DATA = Path(__file__).parent / "data"
MPIRUN_TIMEOUT = 90.0

RunMpi = Callable[..., subprocess.CompletedProcess[str]]


def _missing(reason: str) -> None:
    """Skip on a developer machine without the tool; fail under CI, where `make test` installs it."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason} — `make test` should have installed it")
    pytest.skip(reason)


def _need_mpi() -> None:
    for tool in ("mpicc", "mpirun"):
        if shutil.which(tool) is None:
            _missing(f"{tool} not installed (Debian: openmpi-bin libopenmpi-dev)")


@pytest.fixture(scope="session")
def pmpi_library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """libmcpmpi.so built for real with mpicc, in a private directory."""
    _need_mpi()
    return build_pmpi_library(tmp_path_factory.mktemp("pmpi-lib"))


CompileMpi = Callable[[str], Path]


@pytest.fixture(scope="session")
def compile_mpi(tmp_path_factory: pytest.TempPathFactory) -> CompileMpi:
    """compile_mpi("name") -> tests/elasticity/data/name.c built with mpicc (no knowledge of the profiler)."""
    _need_mpi()

    def build(name: str) -> Path:
        exe = tmp_path_factory.mktemp(name) / name
        subprocess.run(
            ["mpicc", "-O2", "-Wall", "-Werror", "-o", str(exe), str(DATA / f"{name}.c")],
            check=True,
            capture_output=True,
            timeout=120,
        )
        return exe

    return build


@pytest.fixture(scope="session")
def spin_program(compile_mpi: CompileMpi) -> Path:
    return compile_mpi("spin_mpi")


def mpi_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for oversubscribed Open MPI runs as root on a busy 2-core machine."""
    env = {**os.environ, **LOOPBACK_MPI_ENV}
    env.update(
        OMPI_MCA_rmaps_base_oversubscribe="1",
        # On abort, orted escalates SIGTERM to SIGKILL after this many seconds (default 1): on a loaded machine
        # a rank's SIGTERM handler needs longer to write its trace.
        OMPI_MCA_odls_base_sigkill_timeout="4",
    )
    env.update(extra or {})
    return env


@pytest.fixture
def mpi_environment() -> dict[str, str]:
    """mpi_env() as a fixture (tests/ has no packages to import helpers from)."""
    return mpi_env()


@pytest.fixture
def run_mpi(pmpi_library: Path) -> RunMpi:
    """run_mpi(program_args, trace_dir, np=4, jobid=..., profile=True, **pmpi_env) -> CompletedProcess."""

    def run(
        args: Sequence[str],
        trace_dir: Path | None,
        np: int = 4,
        jobid: str = "test",
        profile: bool = True,
        iterations: int | None = None,
        boundary_call: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        env = mpi_env()
        if profile:
            assert trace_dir is not None
            env = pmpi_environment(
                pmpi_library, trace_dir, jobid=jobid, iterations=iterations, boundary_call=boundary_call, base=env
            )
        cmd = ["mpirun", "-np", str(np), "--oversubscribe", *map(str, args)]
        return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=MPIRUN_TIMEOUT, check=False)

    return run


@pytest.fixture(scope="session")
def naca0012_case(tmp_path_factory: pytest.TempPathFactory) -> Case:
    """The OpenFOAM NACA0012 case prepared for real once per session (mesh built, not decomposed).

    Tests take copies (elasticity.workloads.openfoam.copy_case) and decompose those.
    """
    from elasticity.workloads.foam import FoamError, foam_variables
    from elasticity.workloads.openfoam import find_naca0012_source, prepare_naca0012

    try:
        foam_variables()
        find_naca0012_source()
    except FoamError as exc:
        _missing(f"OpenFOAM not available: {exc}")
    return prepare_naca0012(tmp_path_factory.mktemp("naca0012") / "case")
