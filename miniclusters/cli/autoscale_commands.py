"""`minicluster autoscale NAME`: grow and shrink a running MiniCluster with its queue."""

from __future__ import annotations

import time
from pathlib import Path

import click

from miniclusters.cli.cluster_commands import _backend_options, _errors, _open


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
    "--interval",
    "interval_seconds",
    type=click.FloatRange(min=0.1),
    help="Seconds between two looks at the queue [spec or 5].",
)
@click.option("--events", "events_file", type=click.Path(dir_okay=False), help="Append the JSON-lines event log here.")
@click.option(
    "--plot", "plot_file", type=click.Path(dir_okay=False), help="Draw size and queue over time (PNG) at the end."
)
@click.option("--until-idle", is_flag=True, help="Stop once the queue is empty and the cluster is back at its floor.")
@click.option("--timeout", type=click.FloatRange(min=0), help="Stop after this many seconds.")
@_backend_options
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
    backend: str,
    context: str | None,
    namespace: str | None,
) -> None:
    """Scale NAME with its queue, within [max(1, minSize), maxSize]; the lead (index 0) is never removed.

    Pending jobs the scheduler would start at maxSize make it grow; after the idle period with more pods than
    needed it drains the highest ranks (no new jobs; running ones finish) and scales down once they are idle.
    Ctrl-C stops the loop and undrains every rank.

    \b
    Example:
      minicluster autoscale autoscale --spec examples/autoscale.yaml --until-idle --plot autoscale.png
    """
    import tempfile

    from elasticity.control.autoscale import Autoscaler
    from elasticity.control.events import EventLog, read_events
    from elasticity.control.timeline import plot_autoscale_timeline
    from elasticity.policy.autoscale import AutoscaleOptions
    from miniclusters.api.spec import AutoscaleSpec
    from miniclusters.autoscaling.queue import ExecQueue, local_flux
    from miniclusters.backends.ports import ports_for

    configured = AutoscaleSpec()
    if spec_file:
        from miniclusters.api import load_minicluster_file

        with _errors():
            configured = load_minicluster_file(spec_file).spec.autoscale
    options = AutoscaleOptions(
        idle_seconds=float(idle_seconds if idle_seconds is not None else configured.idle_seconds),
        cooldown_seconds=float(cooldown_seconds if cooldown_seconds is not None else configured.cooldown_seconds),
        policy="fcfs" if (policy or configured.policy) == "fcfs" else "easy",
    )
    interval = interval_seconds if interval_seconds is not None else configured.interval_seconds
    log_path = (
        Path(events_file) if events_file else Path(tempfile.mkstemp(prefix=f"autoscale-{name}-", suffix=".jsonl")[1])
    )
    with _errors():
        target = _open(backend, context, namespace)
        observer, actuator = ports_for(target)
        if backend == "kubernetes":
            from miniclusters.backends.kubernetes.lead import LOCAL_URI
            from miniclusters.render.layout import BROKER_INSTALL_DIR

            queue = ExecQueue(target, lambda _n: ["env", f"FLUX_URI={LOCAL_URI}", f"{BROKER_INSTALL_DIR}/bin/flux"])
        else:
            queue = ExecQueue(target, lambda _n: local_flux())
        view = observer.observe(name)
        click.echo(
            f"autoscaling {name}: size {view.size} in [{view.sizes.minimum}, {view.sizes.maximum}], idle "
            f"{options.idle_seconds:g}s, cool-down {options.cooldown_seconds:g}s, policy {options.policy}; "
            f"events in {log_path}",
            err=True,
        )
        deadline = None if timeout is None else time.monotonic() + timeout
        with EventLog(log_path, "autoscale", time.monotonic) as log:
            scaler = Autoscaler(name, observer, actuator, queue, options, clock=time.monotonic, log=log)
            try:
                while deadline is None or time.monotonic() < deadline:
                    plan = scaler.step()
                    current = observer.observe(name).size
                    if plan.size is not None:
                        click.echo(f"{time.strftime('%H:%M:%S')} {name}: size -> {plan.size} ({plan.reason})", err=True)
                    if until_idle:
                        state = queue.queue(name)
                        if not state.pending and not state.running and current == view.sizes.minimum:
                            break
                    time.sleep(interval)
            except KeyboardInterrupt:
                click.echo("stopped", err=True)
            finally:
                if scaler.draining:
                    queue.drain(name, frozenset())
                scaler.record()
        if plot_file:
            path = plot_autoscale_timeline(read_events(log_path), Path(plot_file), title=f"autoscaling {name}")
            click.echo(f"wrote {path}", err=True)


COMMANDS = (autoscale,)
