"""`minicluster autoscale NAME`: grow and shrink a running MiniCluster with its queue."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from miniclusters.cli.backend_options import backend_errors, backend_options, open_backend
from miniclusters.cli.interrupts import EXIT_INTERRUPTED


@click.command()
@click.argument("name")
@click.option(
    "--spec", "spec_file", type=click.Path(exists=True, dir_okay=False), help="Read spec.autoscale from this file."
)
@click.option("--idle-seconds", type=click.IntRange(min=0), help="Surplus time before a shrink [spec or 60].")
@click.option(
    "--cooldown", "cooldown_seconds", type=click.IntRange(min=0), help="Least time between two scales [spec or 30]."
)
@click.option(
    "--policy", type=click.Choice(["easy", "fcfs"]), help="Queue policy the node need is computed with [spec or easy]."
)
@click.option(
    "--interval", "interval_seconds", type=click.FloatRange(min=0.1), help="Seconds between looks at the queue [5]."
)
@click.option("--events", "events_file", type=click.Path(dir_okay=False), help="The JSON-lines event log.")
@click.option("--plot", "plot_file", type=click.Path(dir_okay=False), help="Draw size and queue over time (PNG).")
@click.option("--until-idle", is_flag=True, help="Stop once the queue is empty and the cluster is back at its floor.")
@click.option("--timeout", type=click.FloatRange(min=0), help="Stop after this many seconds.")
@click.option("--started-by", default="cli", hidden=True, help="Who started it (`up` passes 'up'), for status.")
@backend_options
def autoscale(
    name: str,
    spec_file: str | None,
    idle_seconds: int | None,
    cooldown_seconds: int | None,
    policy: str | None,
    interval_seconds: float | None,
    events_file: str | None,
    plot_file: str | None,
    until_idle: bool,
    timeout: float | None,
    started_by: str,
    backend: str,
    context: str | None,
    namespace: str | None,
) -> None:
    """Scale NAME with its queue, within [max(1, minSize), maxSize]; the lead (index 0) is never removed.

    Pending jobs the scheduler would start at maxSize make it grow; after the idle period with more pods than
    needed it drains the highest ranks (no new jobs; running ones finish) and scales down once they are idle.
    It stops when the cluster is deleted, with --until-idle, --timeout, Ctrl-C or SIGTERM, undraining the
    ranks it drained (its drain reason marks them; an operator's drains stay). A loop started after one was
    killed undrains what the killed one left drained. One loop per cluster: a second one is refused.
    `minicluster up` starts one itself when the spec says `autoscale: {enabled: true}` (local backend);
    `minicluster status` shows it (running, or stopped and why) and the drained ranks.

    \b
    Example:
      minicluster autoscale autoscale --spec examples/autoscale.yaml --until-idle --plot autoscale.png
    """
    from elasticity.policy.autoscale import AutoscaleOptions
    from miniclusters.api.extension_specs import AutoscaleSpec
    from miniclusters.autoscaling.queue import ExecQueue, local_flux
    from miniclusters.autoscaling.runner import RunOptions, run_autoscaler
    from miniclusters.autoscaling.state import state_file

    configured = AutoscaleSpec()
    if spec_file:
        from miniclusters.api import load_minicluster_file
        from miniclusters.api.errors import SpecError

        try:
            configured = load_minicluster_file(spec_file).spec.autoscale
        except SpecError as exc:
            click.echo(str(exc), err=True)
            sys.exit(2)
    options = AutoscaleOptions(
        idle_seconds=float(idle_seconds if idle_seconds is not None else configured.idle_seconds),
        cooldown_seconds=float(cooldown_seconds if cooldown_seconds is not None else configured.cooldown_seconds),
        policy="fcfs" if (policy or configured.policy) == "fcfs" else "easy",
    )
    run = RunOptions(
        interval=interval_seconds if interval_seconds is not None else configured.interval_seconds,
        until_idle=until_idle,
        timeout=timeout,
        events=Path(events_file) if events_file else None,
        plot=Path(plot_file) if plot_file else None,
        state=state_file(backend, name),
        started_by=started_by,
    )
    with backend_errors():
        target = open_backend(backend, context, namespace)
        if backend == "kubernetes":
            from miniclusters.autoscaling.queue import lead_flux

            queue = ExecQueue(target, lambda _n: lead_flux())
        else:
            queue = ExecQueue(target, lambda _n: local_flux())
        why = run_autoscaler(target, queue, name, options, run, lambda line: click.echo(line, err=True))
        click.echo(f"autoscaler for {name} stopped: {why}", err=True)
        if why == "interrupted":
            sys.exit(EXIT_INTERRUPTED)


COMMANDS = (autoscale,)
