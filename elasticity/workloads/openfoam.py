"""The OpenFOAM NACA0012 workload (rhoSimpleFoam, 16,000 cells): prepare, bound, decompose, run.

Everything ends in a plain argv (`solver_command`) so a launcher (mpirun today, the broker's job
manager later) can wrap it; the OpenFOAM variables travel inside it as `mpirun -x NAME=value`.

Profiling note: this OpenFOAM (Debian v1912) issues no MPI_Barrier in its iteration loop; per
SIMPLE iteration each rank makes ~700 MPI_Allreduce and ~800 MPI_Waitall calls (4 ranks) and no
call happens exactly once. Use BOUNDARY_CALL (MPI_Allreduce) as the profiler's iteration boundary:
every reduction closes a short window, and the steady-state duty cycle (a ratio of sums over the
windows after the first 10%) is the same as with whole iterations. `-k K` then counts reductions.
"""

from __future__ import annotations

import gzip
import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from elasticity.workloads.foam import (
    FoamError,
    foam_variables,
    get_entry,
    log_tail,
    mesh_cell_count,
    read_internal_vector_field,
    run_tool,
    set_entries,
    write_dictionary,
    write_label_list,
)
from elasticity.workloads.rings import (
    DEFAULT_WEIGHTS,
    concentric_assignment,
    grid_split,
    planar_distances,
    proportional_counts,
)

EXAMPLES_DIR = Path("/usr/share/doc/openfoam-examples/examples")
NACA0012 = Path("compressible/rhoSimpleFoam/aerofoilNACA0012")
SOLVER = "rhoSimpleFoam"
#: The profiler boundary for this solver (see the module docstring).
BOUNDARY_CALL = "MPI_Allreduce"
#: mpirun options for co-located, oversubscribed jobs (REFERENCE.md section 5).
DEFAULT_MPI_ARGS: tuple[str, ...] = ("--oversubscribe", "--mca", "btl", "tcp,self", "--mca", "mpi_yield_when_idle", "1")
#: The name of the cell-to-processor list in constant/ read by the `manual` method.
MANUAL_DATA_FILE = "cellDecomposition"
#: A large write interval: a bounded run writes no time directories (startFrom stays at 0).
NO_WRITE_INTERVAL = 100_000_000
#: The extrusion direction of the 2-D case is y; rings live in the x-z plane.
PLANE_AXES = (0, 2)

Method = Literal["simple", "hierarchical", "concentric"]
METHODS: tuple[str, ...] = ("simple", "hierarchical", "concentric")


@dataclass(frozen=True)
class Case:
    """A prepared OpenFOAM case directory and its mesh size."""

    path: Path
    n_cells: int

    @property
    def control_dict(self) -> Path:
        """system/controlDict."""
        return self.path / "system" / "controlDict"


@dataclass(frozen=True)
class Decomposition:
    """How a case was split: per-processor cell counts as decomposePar reported them."""

    method: str
    n: int
    cells_per_processor: tuple[int, ...]
    weights: tuple[float, ...] | None = None
    #: Processor of every cell (concentric only; simple/hierarchical leave it to decomposePar).
    cell_to_processor: np.ndarray | None = None


def find_naca0012_source(examples_dir: Path | str | None = None) -> Path:
    """The NACA0012 tutorial in the openfoam-examples package, or FoamError saying how to get it."""
    src = Path(examples_dir or EXAMPLES_DIR) / NACA0012
    if not (src / "system").is_dir():
        raise FoamError(
            f"OpenFOAM NACA0012 example not found at {src}; install Debian package openfoam-examples "
            "or pass source= the aerofoilNACA0012 directory"
        )
    return src


def gunzip_tree(root: Path) -> list[Path]:
    """Decompress every *.gz below root in place (Debian ships tutorial files gzipped)."""
    done = []
    for gz in sorted(root.rglob("*.gz")):
        target = gz.with_suffix("")
        with gzip.open(gz, "rb") as src, target.open("wb") as dst:
            shutil.copyfileobj(src, dst)
        gz.unlink()
        done.append(target)
    return done


def prepare_naca0012(
    dest: Path | str, source: Path | str | None = None, env: Mapping[str, str] | None = None, refine: int = 1
) -> Case:
    """Copy the tutorial to `dest`, gunzip it and build the mesh as its Allrun does.

    Allrun needs RunFunctions, which Debian does not ship, so the steps are run directly:
    blockMesh, transformPoints -scale "(1 0 1)" (flatten y to 0), extrudeMesh (one cell thick).
    `dest` must not exist yet (or be empty). Returns the case with its cell count (16,000; `refine` f
    multiplies every block's cells in each direction by f first: 16,000 f^2).
    """
    if refine < 1:
        raise ValueError(f"refine must be at least 1, got {refine}")
    dest = Path(dest).resolve()
    src = Path(source) if source is not None else find_naca0012_source()
    if dest.exists() and any(dest.iterdir()):
        raise FileExistsError(f"{dest} exists and is not empty; prepare into a new directory")
    foam_variables()  # fail early, before copying, if OpenFOAM is not installed
    shutil.copytree(src, dest, dirs_exist_ok=True)
    for p in dest.rglob("*"):  # the package's files are read-only copies
        p.chmod(p.stat().st_mode | 0o200)
    gunzip_tree(dest)
    if refine > 1:
        refine_block_mesh(dest, refine)
    run_tool(dest, "blockMesh", env=env)
    run_tool(dest, "transformPoints", "-scale", "(1 0 1)", env=env)
    run_tool(dest, "extrudeMesh", env=env)
    return Case(dest, mesh_cell_count(dest))


_BLOCK_CELLS = re.compile(r"^(\s+(?:zCells|xUCells|xMCells|xDCells)\s+)(\d+)(\s*;)", re.MULTILINE)


def refine_block_mesh(case_path: Path, factor: int) -> None:
    """Multiply the tutorial's block cell counts (system/blockMeshDict's domain: zCells, xUCells, xMCells,
    xDCells) by `factor`, the gradings kept: a finer mesh of the same shape, more work between two reductions."""
    path = case_path / "system" / "blockMeshDict"
    text, found = _BLOCK_CELLS.subn(lambda m: f"{m.group(1)}{int(m.group(2)) * factor}{m.group(3)}", path.read_text())
    if found != 4:
        raise FoamError(f"{path}: expected the 4 block cell counts (zCells, xUCells, xMCells, xDCells), found {found}")
    path.write_text(text)


def copy_case(case: Case, dest: Path | str) -> Case:
    """A fresh copy of a prepared case (mesh, 0/, system/), without decomposition, logs or results.

    Lets tests and benches prepare the mesh once and decompose copies independently.
    """
    dest = Path(dest).resolve()

    def skip(_dir: str, names: list[str]) -> list[str]:
        return [n for n in names if n.startswith(("processor", "log.")) or n == "postProcessing"]

    shutil.copytree(case.path, dest, ignore=skip)
    return Case(dest, case.n_cells)


def set_end_time(case: Case, iterations: int, *, write: bool = False) -> None:
    """Bound the run to `iterations` SIMPLE iterations from time 0 (deltaT is 1).

    Without `write`, the write interval is made huge so a short run writes no time directory; the
    run also always starts from 0, so repeated runs of the same case do the same work.
    """
    if iterations < 1:
        raise ValueError(f"iterations must be at least 1, got {iterations}")
    entries: dict[str, str | int | float] = {
        "startFrom": "startTime",
        "startTime": 0,
        "stopAt": "endTime",
        "endTime": iterations,
        "deltaT": 1,
        "writeControl": "timeStep",
    }
    if not write:
        entries["writeInterval"] = NO_WRITE_INTERVAL
    set_entries(case.control_dict, entries)


def end_time(case: Case) -> int:
    """The endTime in system/controlDict (the number of iterations of a bounded run)."""
    value = get_entry(case.control_dict, "endTime")
    if value is None:
        raise FoamError(f"{case.control_dict}: no endTime")
    return int(float(value))


def aerofoil_centre(case: Case) -> tuple[float, float, float]:
    """The chord mid-point from blockMeshDict's aerofoil dictionary (xLead/zLead, xTrail/zTrail)."""
    path = case.path / "system" / "blockMeshDict"
    text = path.read_text()
    m = re.search(r"^aerofoil\s*\{([^}]*)\}", text, re.MULTILINE)
    if m is None:
        raise FoamError(f"{path}: no aerofoil dictionary to find the chord from")
    values = dict(re.findall(r"(\w+)\s+([-+0-9.eE]+)\s*;", m.group(1)))
    try:
        x = (float(values["xLead"]) + float(values["xTrail"])) / 2
        z = (float(values["zLead"]) + float(values["zTrail"])) / 2
    except KeyError as exc:
        raise FoamError(f"{path}: aerofoil dictionary lacks {exc.args[0]}") from None
    return x, 0.0, z


def cell_centres(case: Case, env: Mapping[str, str] | None = None) -> np.ndarray:
    """(n_cells, 3) cell centres, computed by OpenFOAM itself (postProcess -func writeCellCentres).

    The written C/Cx/Cy/Cz fields are removed afterwards so decomposePar and the solver never see them.
    """
    run_tool(case.path, "postProcess", "-func", "writeCellCentres", "-time", "0", env=env)
    zero = case.path / "0"
    try:
        centres = read_internal_vector_field(zero / "C")
    finally:
        for name in ("C", "Cx", "Cy", "Cz"):
            (zero / name).unlink(missing_ok=True)
    if centres.shape[0] != case.n_cells:
        raise FoamError(f"{case.path}: {centres.shape[0]} cell centres for {case.n_cells} cells")
    return centres


def concentric_processors(
    case: Case, weights: Sequence[float] | np.ndarray, env: Mapping[str, str] | None = None
) -> np.ndarray:
    """Processor of every cell: rings around the chord mid-point, heaviest weights innermost."""
    distances = planar_distances(cell_centres(case, env), aerofoil_centre(case), PLANE_AXES)
    return concentric_assignment(distances, weights)


_CELLS_RE = re.compile(r"^Processor (\d+)\s*\n\s*Number of cells = (\d+)", re.MULTILINE)


def _decompose_par_dict(n: int, method: str) -> str:
    if method == "manual":
        coeffs = f'manualCoeffs\n{{\n    dataFile    "{MANUAL_DATA_FILE}";\n}}\n'
    else:
        nx, ny, nz = grid_split(n)
        order = "    order       xyz;\n" if method == "hierarchical" else ""
        coeffs = f"{method}Coeffs\n{{\n    n           ({nx} {ny} {nz});\n    delta       0.001;\n{order}}}\n"
    return f"numberOfSubdomains {n};\n\nmethod          {method};\n\n{coeffs}"


def decompose(
    case: Case,
    n: int,
    method: Method = "simple",
    weights: Sequence[float] | np.ndarray | None = None,
    env: Mapping[str, str] | None = None,
) -> Decomposition:
    """Split the case for n ranks with decomposePar (replacing any earlier decomposition).

    simple / hierarchical: a geometric nx x 1 x nz grid in the x-z plane. concentric: rings by
    distance to the aerofoil (see elasticity.workloads.rings), written to constant/cellDecomposition
    and applied with the `manual` method; `weights` default to DEFAULT_WEIGHTS for 16 ranks, equal otherwise.
    """
    if method not in METHODS:
        raise ValueError(f"unknown decomposition method {method!r}; choose one of {', '.join(METHODS)}")
    if n < 1:
        raise ValueError(f"number of processors must be at least 1, got {n}")
    w: tuple[float, ...] | None = None
    assignment: np.ndarray | None = None
    foam_method: str = method
    if method == "concentric":
        if weights is None:
            weights = DEFAULT_WEIGHTS if n == len(DEFAULT_WEIGHTS) else (1.0,) * n
        w = tuple(float(x) for x in weights)
        if len(w) != n:
            raise ValueError(f"{len(w)} weights for {n} processors")
        assignment = concentric_processors(case, w, env)
        write_label_list(case.path / "constant" / MANUAL_DATA_FILE, assignment, MANUAL_DATA_FILE)
        foam_method = "manual"
    elif weights is not None:
        raise ValueError(f"weights apply to the concentric method only, not {method!r}")
    write_dictionary(case.path / "system" / "decomposeParDict", _decompose_par_dict(n, foam_method), "decomposeParDict")
    log = run_tool(case.path, "decomposePar", "-force", env=env)
    counts = {int(p): int(c) for p, c in _CELLS_RE.findall(log.read_text(errors="replace"))}
    if sorted(counts) != list(range(n)):
        raise FoamError(f"decomposePar reported processors {sorted(counts)}, expected 0..{n - 1}; log {log}")
    cells = tuple(counts[i] for i in range(n))
    if assignment is not None and w is not None:
        expected = tuple(int(c) for c in proportional_counts(case.n_cells, w))
        if cells != expected:
            raise FoamError(f"decomposePar split the cells {cells}, but the manual list asked for {expected}")
    return Decomposition(method, n, cells, w, assignment)


def solver_command(
    case: Case | Path | str,
    nprocs: int,
    extra_mpi_args: Sequence[str] = (),
    *,
    mpirun: str = "mpirun",
    mpi_args: Sequence[str] = DEFAULT_MPI_ARGS,
    allow_run_as_root: bool | None = None,
    forward_foam_env: bool = True,
) -> list[str]:
    """The argv that runs rhoSimpleFoam -parallel on a decomposed case.

    The OpenFOAM variables are forwarded with `-x NAME=value`, so the argv works from any shell and
    on remote ranks. allow_run_as_root=None adds --allow-run-as-root only when running as root.
    """
    if nprocs < 1:
        raise ValueError(f"nprocs must be at least 1, got {nprocs}")
    path = Path(case.path if isinstance(case, Case) else case).resolve()
    cmd = [mpirun, "-np", str(nprocs), *mpi_args]
    if allow_run_as_root or (allow_run_as_root is None and os.geteuid() == 0):
        cmd.append("--allow-run-as-root")
    if forward_foam_env:
        for name, value in sorted(foam_variables().items()):
            cmd += ["-x", f"{name}={value}"]
    cmd += [*extra_mpi_args, SOLVER, "-parallel", "-case", str(path)]
    return cmd


def run_solver(
    command: Sequence[str],
    case: Case,
    env: Mapping[str, str] | None = None,
    timeout: float = 600.0,
    log_name: str = f"log.{SOLVER}",
) -> Path:
    """Run a solver argv (e.g. solver_command's), logging to case/log.rhoSimpleFoam.

    `env` (default os.environ) is used as given: solver_command's argv carries the OpenFOAM
    variables itself (`mpirun -x`), as it must under any other launcher. Raises FoamError with
    the log's tail when it fails, or when the solver did not reach its end
    (OpenFOAM prints "End" when the time loop finishes).
    """
    log = case.path / log_name
    run_env = dict(os.environ if env is None else env)
    try:
        with log.open("w") as out:
            proc = subprocess.run(
                list(command), env=run_env, stdout=out, stderr=subprocess.STDOUT, timeout=timeout, check=False
            )
    except subprocess.TimeoutExpired as exc:
        raise FoamError(f"{SOLVER} timed out after {timeout:.0f} s; log {log}:\n{log_tail(log)}") from exc
    except OSError as exc:
        raise FoamError(f"{command[0]} could not be started: {exc}") from exc
    if proc.returncode != 0:
        raise FoamError(f"{SOLVER} failed (exit {proc.returncode}); log {log}:\n{log_tail(log)}")
    if not re.search(r"^End\s*$", log.read_text(errors="replace"), re.MULTILINE):
        raise FoamError(f"{SOLVER} exited without finishing its time loop; log {log}:\n{log_tail(log)}")
    return log


def solver_iterations(log: Path) -> int:
    """Number of iterations a solver log shows (its `Time = N` lines)."""
    return len(re.findall(r"^Time = \S+\s*$", log.read_text(errors="replace"), re.MULTILINE))
