"""PMPI profiling commands: build the interposition library, profile an MPI run, propose per-pod CPU."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import click

from miniclusters.cli.arguments import command_words


@click.group()
def pmpi() -> None:
    """The PMPI duty-cycle profiler (a shared library loaded with LD_PRELOAD).

    \b
    Example:
      minicluster pmpi build
    """


@pmpi.command("build")
@click.option("--output-dir", type=click.Path(file_okay=False), help="Where to put libmcpmpi.so (default: cache).")
@click.option("--mpicc", default="mpicc", show_default=True, help="The MPI compiler wrapper to build with.")
@click.option("--force", is_flag=True, help="Rebuild even if the cached library is current.")
def pmpi_build(output_dir: str | None, mpicc: str, force: bool) -> None:
    """Compile the profiler with the installed MPI compiler wrapper and print the library's path.

    \b
    Example:
      LD_PRELOAD=$(minicluster pmpi build) mpirun -np 4 ./solver
    """
    from elasticity.pmpi.build import PmpiBuildError, build_pmpi_library

    try:
        library = build_pmpi_library(output_dir=output_dir, mpicc=mpicc, force=force)
    except PmpiBuildError as exc:
        click.echo(f"minicluster pmpi build: {exc}", err=True)
        sys.exit(1)
    click.echo(str(library))


@click.command(context_settings={"ignore_unknown_options": True})
@click.argument("command", nargs=-1, type=click.UNPROCESSED, callback=command_words)
@click.option(
    "--traces",
    type=click.Path(file_okay=False),
    help="With COMMAND: write the traces here (default: a new temporary directory); alone: analyse them.",
)
@click.option("--iterations", "-k", type=click.IntRange(min=1), help="Profile only the first K iterations.")
@click.option("--boundary", default="MPI_Barrier", show_default=True, help="The MPI call that ends an iteration.")
@click.option(
    "--skip",
    "skip_fraction",
    default=0.1,
    show_default=True,
    type=click.FloatRange(0, 0.9),
    help="Fraction of iterations skipped as warm-up.",
)
@click.option(
    "--floor",
    "floor_millicores",
    default=10,
    show_default=True,
    type=click.IntRange(min=1),
    help="Smallest request per pod (millicores).",
)
@click.option("--ceiling", "ceiling_millicores", type=click.IntRange(min=1), help="Largest request per pod.")
@click.option("--budget", "budget_millicores", type=click.IntRange(min=1), help="Total millicores to share out.")
@click.option(
    "--mode",
    type=click.Choice(["proportional", "weight-preserving"]),
    default="proportional",
    show_default=True,
    help="weight-preserving keeps cgroup v2 kernel weights in the intended ratios.",
)
@click.option(
    "--formula",
    type=click.Choice(["v1", "v2-linear", "v2-nonlinear"]),
    default="v2-nonlinear",
    show_default=True,
    help="How the kubelet/runtime turns requests into kernel weights.",
)
@click.option(
    "--plot",
    type=click.Path(dir_okay=False),
    default="profile.png",
    show_default=True,
    help="Where to write the figure (time split and duty cycle per rank).",
)
def profile(
    command: tuple[str, ...],
    traces: str | None,
    iterations: int | None,
    boundary: str,
    skip_fraction: float,
    floor_millicores: int,
    ceiling_millicores: int | None,
    budget_millicores: int | None,
    mode: str,
    formula: str,
    plot: str,
) -> None:
    """Profile an MPI program's duty cycles and propose per-pod CPU requests (requests only, no limits).

    Runs COMMAND (e.g. `mpirun -np 4 ./solver`) with the profiler preloaded (traces in --traces DIR, if given),
    or analyses the traces already in --traces DIR.

    \b
    Example:
      minicluster profile -k 50 -- mpirun -np 4 --oversubscribe rhoSimpleFoam -parallel
      minicluster profile --traces ./traces --budget 4000 --mode weight-preserving
    """
    from elasticity.profiling.profile import profile_traces, run_profiled
    from elasticity.profiling.report import print_report, write_figure
    from elasticity.profiling.trace import TraceFormatError

    if not command and not traces:
        raise click.UsageError("give either a COMMAND to run or --traces DIR to analyse")
    trace_dir = traces or tempfile.mkdtemp(prefix="mc-pmpi-")
    if command:
        click.echo(f"profiling {' '.join(command)} (traces in {trace_dir}) ...", err=True)
        env = dict(os.environ)
        if os.geteuid() == 0:  # Open MPI refuses root without the opt-in our application image also sets
            env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
            env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        run = run_profiled(list(command), trace_dir, iterations=iterations, boundary_call=boundary, env=env)
        sys.stdout.write(run.stdout)
        sys.stderr.write(run.stderr)
        if run.returncode != 0:
            click.echo(f"minicluster profile: the command exited with {run.returncode}", err=True)
            sys.exit(run.returncode or 1)
    try:
        result = profile_traces(
            trace_dir,
            boundary_call=boundary,
            skip_fraction=skip_fraction,
            iterations=iterations,
            floor_millicores=floor_millicores,
            ceiling_millicores=ceiling_millicores,
            budget_millicores=budget_millicores,
            mode=mode,  # type: ignore[arg-type]
            formula=formula,  # type: ignore[arg-type]
        )
    except (TraceFormatError, ValueError) as exc:
        click.echo(f"minicluster profile: {exc}", err=True)
        sys.exit(2)
    print_report(result.analysis, result.plan)
    write_figure(result.analysis, Path(plot))
    click.echo(f"figure written to {plot}", err=True)
