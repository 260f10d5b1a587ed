"""NACA0012 cases as the jobs of a launcher that starts the ranks itself (`flux submit -o mpi=openmpi`).

A multiplexing controller submits one command for every simulation, each in a working directory of its own; an
OpenFOAM case, though, is a directory its run writes into (the function objects' postProcessing/). So the command
(`job_command`) makes every job its own copy of one prepared case in the job's working directory before the
solver starts: each rank copies the case into a temporary directory there and renames it to `case`, the first
rename wins and the others discard their copy, so every rank of a job reads the same complete case and no two
jobs share one. The case (`prepare_job_case`) is the tutorial meshed once, decomposed in concentric rings (the
imbalanced layout the multiplexing work is about: dense near-wall ranks, sparse far-field ones), with
forceCoeffs (Cl, Cd every iteration) and without the tutorial's convergence stop, so every run does the same
number of iterations.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path

from elasticity.workloads.foam import FoamError, foam_variables
from elasticity.workloads.naca_sweep import apply_free_stream, free_stream
from elasticity.workloads.openfoam import SOLVER, Case, decompose, prepare_naca0012, set_end_time

#: The seed's imbalanced layout for 4 ranks: its 16-rank rings (1 x8, 5 x4, 15 x4) in the same proportions,
#: two sparse far-field ranks, one medium and one dense near-wall rank (innermost last).
JOB_WEIGHTS: tuple[float, ...] = (1.0, 1.0, 5.0, 15.0)
#: Where each job's copy of the case goes, inside the job's working directory.
JOB_CASE = "case"
_RESIDUAL_CONTROL = re.compile(r"^(\s*)residualControl\s*\{[^{}]*\}\s*\n", re.MULTILINE)

#: Run by every rank (`sh -c`): $1 the prepared case, then the solver's argv. A copy is made only while the job's
#: own `case` is missing; `mv -T` onto a directory another rank already filled fails, and that rank's copy goes.
_RANK_SCRIPT = (
    f'base=$1; shift; if [ ! -d {JOB_CASE} ]; then tmp=$(mktemp -d ./.{JOB_CASE}.XXXXXX) && cp -R "$base"/. "$tmp"/ '
    f'&& {{ mv -T "$tmp" {JOB_CASE} 2>/dev/null || rm -rf "$tmp"; }}; fi; exec "$@" -case "$PWD/{JOB_CASE}"'
)


def without_residual_control(case: Case) -> None:
    """Drop SIMPLE's residualControl (system/fvSolution): the run does all its iterations, converged or not, so
    two runs of the same case always do the same work."""
    path = case.path / "system" / "fvSolution"
    text = path.read_text()
    path.write_text(_RESIDUAL_CONTROL.sub("", text, count=1))


def prepare_job_case(
    dest: Path | str,
    iterations: int,
    weights: Sequence[float] = JOB_WEIGHTS,
    alpha_deg: float = 0.0,
    refine: int = 1,
) -> Case:
    """The tutorial at `dest` (a new directory), its mesh refined `refine` times in each direction, bounded to
    `iterations`, forceCoeffs at `alpha_deg`, decomposed concentrically for len(weights) ranks. Raises FoamError
    (OpenFOAM missing, a tool failing) or ValueError."""
    if iterations < 1:
        raise ValueError(f"iterations must be at least 1, got {iterations}")
    case = prepare_naca0012(dest, refine=refine)
    apply_free_stream(case.path, free_stream("angleOfAttack", alpha_deg))
    without_residual_control(case)
    set_end_time(case, iterations)
    decompose(case, len(weights), "concentric", weights=list(weights))
    return case


def job_command(
    case: Case | Path,
    extra_env: Sequence[str] = (),
    solver: Sequence[str] = (SOLVER, "-parallel"),
    variables: Mapping[str, str] | None = None,
) -> list[str]:
    """The argv one rank runs: OpenFOAM's variables (`variables`, default the installed OpenFOAM's) and
    `extra_env` (NAME=value) set by `env`, then the script that gives the job its own copy of `case`, then the
    solver (`rhoSimpleFoam -parallel`) with `-case <that copy>`."""
    path = Path(case.path if isinstance(case, Case) else case).resolve()
    if not (path / "processor0").is_dir():
        raise FoamError(f"{path}: not decomposed (no processor0); prepare it with prepare_job_case")
    for item in extra_env:
        if "=" not in item or not item.split("=", 1)[0]:
            raise ValueError(f"extra_env: NAME=value expected, got {item!r}")
    found = foam_variables() if variables is None else variables
    settings = [f"{k}={v}" for k, v in sorted(found.items())]
    return ["env", *settings, *extra_env, "sh", "-c", _RANK_SCRIPT, "sh", str(path), *solver]


def job_command_line(case: Case | Path, extra_env: Sequence[str] = ()) -> str:
    """`job_command` as one shell-quoted line (what `minicluster multiplex --command` takes)."""
    return shlex.join(job_command(case, extra_env))
