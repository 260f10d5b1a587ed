"""`minicluster simulate`: replay a trace (or the Jacobi mixes) through the scheduling policies."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from elasticity.policy.scheduling.registry import PRIORITY_POLICIES, TRACE_POLICIES
from miniclusters.words import plural

if TYPE_CHECKING:
    from elasticity.sim.experiment import Row

DEFAULT_TRACE_POLICIES = "easy,min,avg,pref,keeppref"
DEFAULT_JACOBI_POLICIES = "elastic,moldable,rigid-min,rigid-max"


def parse_policies(text: str, allowed: tuple[str, ...], what: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise click.BadParameter("give at least one policy", param_hint="--policy")
    for name in names:
        if name not in allowed:
            raise click.BadParameter(
                f"{name!r} is not a {what} policy (choose from {', '.join(allowed)})", param_hint="--policy"
            )
    return list(dict.fromkeys(names))


def parse_shares(text: str) -> list[float]:
    """'0,20,40' or '0,20,..,100' (the step of the first two values continued up to the last)."""
    parts = [part.strip() for part in text.split(",") if part.strip()]
    values: list[float] = []
    try:
        if ".." in parts:
            at = parts.index("..")
            if at < 2 or at != len(parts) - 2:
                raise ValueError
            head = [float(p) for p in parts[:at]]
            step, last = head[-1] - head[-2], float(parts[-1])
            if step <= 0:
                raise ValueError
            values = head
            while values[-1] + step <= last + 1e-9:
                values.append(round(values[-1] + step, 9))
        else:
            values = [float(p) for p in parts]
    except ValueError:
        raise click.BadParameter(
            f"{text!r}: expected percentages like 0,20,40 or 0,20,..,100", param_hint="--malleable"
        ) from None
    if not values or any(not 0 <= v <= 100 for v in values):
        raise click.BadParameter(f"{text!r}: percentages must be within 0..100", param_hint="--malleable")
    return list(dict.fromkeys(values))


@click.command()
@click.argument("trace", required=False, type=click.Path(exists=True, dir_okay=False))
@click.option("--workload", type=click.Choice(["jacobi"]), help="Generate a workload instead of reading a TRACE.")
@click.option(
    "--policy",
    "policy_text",
    help=f"Policies, comma-separated [trace: {DEFAULT_TRACE_POLICIES}; jacobi: {DEFAULT_JACOBI_POLICIES}].",
)
@click.option(
    "--malleable",
    "share_text",
    default="100",
    show_default=True,
    help="Percent of jobs made malleable, e.g. 0,20,..,100.",
)
@click.option(
    "--seeds", type=click.IntRange(min=1), default=10, show_default=True, help="Repetitions with different seeds."
)
@click.option("--nodes", type=click.IntRange(min=1), help="Machine size (default: the trace header; jacobi: 64).")
@click.option("--jobs", type=click.IntRange(min=1), default=16, show_default=True, help="Jacobi: jobs per mix.")
@click.option(
    "--gap", type=click.FloatRange(min=0), default=90.0, show_default=True, help="Jacobi: seconds between submissions."
)
@click.option(
    "--rescale-gap",
    type=click.FloatRange(min=0),
    default=60.0,
    show_default=True,
    help="Elastic: minimum seconds between two rescales of one job.",
)
@click.option(
    "--rescale-overhead",
    type=click.FloatRange(min=0),
    default=0.0,
    show_default=True,
    help="Seconds without progress per resize.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the rows as JSON (notes go to stderr).")
@click.option(
    "--schedule-out",
    type=click.Path(dir_okay=False, writable=True),
    help="Write job,submit,start,end,nodes,resizes per job and run (CSV).",
)
@click.option(
    "--plot", "plot_dir", type=click.Path(file_okay=False), help="Draw the figures (PNG) into this directory."
)
def simulate(
    trace: str | None,
    workload: str | None,
    policy_text: str | None,
    share_text: str,
    seeds: int,
    nodes: int | None,
    jobs: int,
    gap: float,
    rescale_gap: float,
    rescale_overhead: float,
    as_json: bool,
    schedule_out: str | None,
    plot_dir: str | None,
) -> None:
    """Replay an SWF TRACE (or --workload jacobi) through scheduling policies and compare them.

    Policies for traces: fcfs, easy (rigid baselines) and the malleable strategies min, avg, pref, keeppref.
    For the Jacobi mixes: elastic, moldable, rigid-min, rigid-max. Every metric is a mean over seeds, with its
    interquartile range.

    \b
    Example:
      minicluster simulate ../shared/traces/NASA-iPSC-1993-3.1-cln.swf --policy easy,min --seeds 2
      minicluster simulate --workload jacobi --jobs 16 --gap 90 --policy elastic,moldable,rigid-min,rigid-max
    """
    from elasticity.sim.experiment import reduce, run_jacobi, run_trace
    from elasticity.sim.metrics import EXCLUSION_NOTE
    from elasticity.sim.swf import SWFError, read_swf
    from elasticity.sim.workload import from_swf

    if (trace is None) == (workload is None):
        raise click.UsageError("give either a TRACE file or --workload jacobi (exactly one)")
    if workload == "jacobi":
        policies = parse_policies(policy_text or DEFAULT_JACOBI_POLICIES, PRIORITY_POLICIES, "Jacobi-mix")
        shares = [100.0]
        total = seeds * len(policies)
    else:
        policies = parse_policies(policy_text or DEFAULT_TRACE_POLICIES, TRACE_POLICIES, "trace")
        shares = parse_shares(share_text)
        total = seeds * len(policies) * len(shares)

    from rich.console import Console
    from rich.progress import Progress

    err = Console(stderr=True)
    with Progress(console=err, transient=True, disable=not err.is_terminal) as progress:
        task = progress.add_task("simulating", total=total)

        def step(label: str) -> None:
            progress.update(task, advance=1, description=label)

        try:
            if workload == "jacobi":
                runs = run_jacobi(
                    jobs,
                    gap,
                    policies,
                    seeds,
                    slots=nodes or 64,
                    rescale_gap=rescale_gap,
                    rescale_overhead=rescale_overhead,
                    progress=step,
                )
                title = f"Jacobi mixes: {plural(jobs, 'job')} every {gap:g} s, {plural(seeds, 'seed')}"
            else:
                assert trace is not None
                base = from_swf(read_swf(trace), nodes)
                runs = run_trace(base, policies, shares, seeds, rescale_overhead=rescale_overhead, progress=step)
                title = (
                    f"{Path(trace).name}: {plural(len(base.jobs), 'job')} on {plural(base.nodes, 'node')}, "
                    f"{plural(seeds, 'seed')}"
                )
        except (SWFError, ValueError) as exc:
            err.print(f"minicluster simulate: {exc}", markup=False, highlight=False)
            sys.exit(2)
    rows = reduce(runs)
    notes = [*dict.fromkeys(n for run in runs if run.seed == 0 for n in run.result.notes if "seed" not in n)]
    notes += sorted(
        {n.split(" (seed")[0] + n.split(")", 1)[1] for run in runs for n in run.result.notes if "(seed" in n}
    )
    notes.append(EXCLUSION_NOTE)
    if workload == "jacobi":
        notes.append(f"elastic: minimum {rescale_gap:g} s between two rescales of one job")
    notes.append(f"rescale overhead: {rescale_overhead:g} s per resize")

    if as_json:
        click.echo(json.dumps([row.as_json() for row in rows], indent=1))
        for note in notes:
            err.print(f"note: {note}", markup=False, highlight=False)
    else:
        _print_table(title, rows, notes)
    if schedule_out:
        from elasticity.sim.report import write_schedule

        count = write_schedule(runs, Path(schedule_out))
        err.print(f"wrote {count} rows to {schedule_out}", markup=False, highlight=False)
    if plot_dir:
        from elasticity.sim.plots import plot_rows, plot_utilization

        out = Path(plot_dir)
        out.mkdir(parents=True, exist_ok=True)
        stem = "jacobi" if workload == "jacobi" else Path(trace or "trace").stem
        for path in (
            plot_rows(rows, title, out / f"{stem}-metrics.png"),
            plot_utilization(runs, title, out / f"{stem}-utilization.png"),
        ):
            err.print(f"wrote {path}", markup=False, highlight=False)


def _print_table(title: str, rows: Sequence[Row], notes: list[str]) -> None:
    from rich.console import Console
    from rich.table import Table

    from elasticity.sim.report import HEADERS, cells

    table = Table(title=title, title_justify="left")
    for header in HEADERS:
        table.add_column(header, justify="left" if header == "policy" else "right")
    for row in rows:
        table.add_row(*cells(row))
    console = Console(width=200)
    console.print(table)
    for note in notes:
        console.print(f"note: {note}", markup=False, highlight=False)
