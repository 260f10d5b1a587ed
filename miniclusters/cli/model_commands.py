"""`minicluster model fit`: the multiplexing throughput model from measured makespans."""

from __future__ import annotations

import json
import sys

import click


def _parse_makespans(ctx: click.Context, param: click.Parameter, value: str) -> list[float]:
    """'T1,T2,...' -> floats (N = 1, 2, ...); click turns BadParameter into exit code 2 naming the flag."""
    from elasticity.model.throughput import check_makespans

    words = [w.strip() for w in value.split(",") if w.strip()]
    try:
        numbers = [float(w) for w in words]
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a comma-separated list of seconds (e.g. 100,130,170)") from None
    try:
        return check_makespans(numbers)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


@click.group()
def model() -> None:
    """The throughput model of CPU multiplexing: Theta(N) = N / (S_N + beta (rho_N - rho_1)).

    S_N = max(1, N u) / max(1, u) is the stretch once N simulations want more CPU than the nodes have (u: the
    share of the cores one keeps busy, from --duty); without --duty it is 1: the paper's linear model.

    \b
    Example:
      minicluster model fit --makespans 100,130 --ranks 16 --nodes 12 --cores 8
    """


@model.command("fit")
@click.option(
    "--makespans",
    required=True,
    callback=_parse_makespans,
    help="Makespans in seconds of one simulation when N = 1, 2, ... run at once (at least two).",
)
@click.option("--ranks", required=True, type=click.IntRange(min=1), help="MPI ranks per simulation (R).")
@click.option("--nodes", required=True, type=click.IntRange(min=1), help="Nodes the simulations share (M).")
@click.option("--cores", required=True, type=click.FloatRange(min=0, min_open=True), help="CPU cores per node (C).")
@click.option(
    "--duty",
    type=click.FloatRange(min=0, max=1),
    help="Mean PMPI duty cycle of a simulation's ranks (0..1; `minicluster profile` reports it): predicts past "
    "saturation. Without it, the paper's linear model.",
)
@click.option(
    "--threshold",
    default=0.85,
    show_default=True,
    type=click.FloatRange(min=0, max=1, min_open=True),
    help="Efficiency Theta(N)/N the knee must keep.",
)
@click.option(
    "--max-n", default=64, show_default=True, type=click.IntRange(min=1), help="Largest N the knee search considers."
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of the table.")
@click.option("--plot", type=click.Path(dir_okay=False), help="Write measured points and the model curve as a PNG.")
def model_fit(
    makespans: list[float],
    ranks: int,
    nodes: int,
    cores: float,
    duty: float | None,
    threshold: float,
    max_n: int,
    as_json: bool,
    plot: str | None,
) -> None:
    """Fit beta (least squares, with its standard error) and predict Theta(N), the makespans and the knee.

    \b
    Example:
      minicluster model fit --makespans 100,113,126 --ranks 16 --nodes 12 --cores 8 --plot theta.png
      minicluster model fit --makespans 60.2,75.9 --ranks 4 --nodes 2 --cores 1 --json
      minicluster model fit --makespans 55.6,67.7 --ranks 4 --nodes 2 --cores 1 --duty 0.24
    """
    from rich.console import Console
    from rich.table import Table

    from elasticity.model.throughput import Geometry, fit_beta, measured_theta, predictions, stretch

    try:
        geometry = Geometry(ranks, nodes, cores)
    except ValueError as exc:
        raise click.UsageError(f"--ranks/--nodes/--cores: {exc}") from None
    demand = 0.0 if duty is None else geometry.demand([duty] * ranks)
    try:
        fitted = fit_beta(makespans, geometry, demand)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--makespans") from None
    knee = fitted.knee(threshold, max_n)
    k = len(makespans)
    shown = range(1, max(k, min(knee + 1, max_n)) + 1)
    if as_json:
        out = {
            "beta": fitted.beta,
            "beta_stderr": fitted.beta_stderr,
            "demand": fitted.demand,
            "knee": knee,
            "threshold": threshold,
            "predictions": predictions(fitted, shown),
        }
        click.echo(json.dumps(out))
    else:
        console = Console()
        se = f"± {fitted.beta_stderr:.4f}" if k > 2 else "(exact from one N=2 run)"
        load = "" if duty is None else f", u={fitted.demand:.3f} from duty {duty:g}"
        console.print(f"beta = {fitted.beta:.4f} {se}   (R={ranks}, M={nodes}, C={cores:g}{load})")
        measured = measured_theta(makespans)
        table = Table(title="Throughput gain Theta(N): measured vs model")
        for col in ("N", "rho_N", "S_N", "T_N s", "model T_N s", "Theta", "model Theta", "error"):
            table.add_column(col, justify="right")
        for n in shown:
            predicted = fitted.theta(n)
            if n <= k:
                error = f"{(predicted - measured[n - 1]) / measured[n - 1]:+.1%}"
                row = [f"{makespans[n - 1]:.2f}", f"{fitted.makespan(n):.2f}", f"{measured[n - 1]:.3f}"]
            else:
                error = "-"
                row = ["-", f"{fitted.makespan(n):.2f}", "-"]
            saturation = f"{stretch(n, fitted.demand):.3f}"
            table.add_row(str(n), f"{fitted.geometry.rho(n):.3f}", saturation, *row, f"{predicted:.3f}", error)
        console.print(table)
        console.print(
            f"knee: N = {knee} (largest N with efficiency Theta(N)/N >= {threshold:.0%}: "
            f"{fitted.efficiency(knee):.1%})" + (f"; the search stopped at --max-n {max_n}" if knee == max_n else "")
        )
    if plot:
        from elasticity.figures.throughput import write_throughput_figure

        write_throughput_figure(fitted, makespans, plot, n_max=max(shown), knee=knee)
        click.echo(f"figure written to {plot}", err=True)
    sys.stdout.flush()
