"""`minicluster multiplex`: several simulations on one MiniCluster's pods at nearly full throughput."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import click

from miniclusters.cli.cluster_commands import _backend_options, _errors, _open


def _spec_defaults(backend: Any, name: str) -> dict[str, Any]:
    """spec.multiplexing and spec.tasks of a local cluster (the Kubernetes path takes flags only)."""
    store = getattr(backend, "store", None)
    if store is None:
        return {}
    try:
        spec = store.load_spec(name).get("spec", {})
    except (OSError, ValueError, KeyError):
        return {}
    mux = dict(spec.get("multiplexing") or {})
    mux.setdefault("tasks", spec.get("tasks", 1))
    return mux


@click.command()
@click.argument("name")
@click.option("--command", "command", help="The simulation: MPI program and arguments (default: spec.multiplexing).")
@click.option("--max", "max_n", type=click.IntRange(min=1), help="Most simulations at once [spec or 4].")
@click.option("--total", type=click.IntRange(min=1), help="Simulations to run in all [--max].")
@click.option("--ranks", type=click.IntRange(min=1), help="MPI ranks per simulation [spec.tasks].")
@click.option("--profile-iterations", type=click.IntRange(min=1), help="Iterations profiled with PMPI [50].")
@click.option("--fairness", type=click.FloatRange(min=1.0), help="Largest fastest/slowest progress ratio [1.10].")
@click.option(
    "--efficiency", type=click.FloatRange(min=0.01, max=1.0), help="Theta(N)/N the next simulation must keep [0.85]."
)
@click.option("--headroom", type=click.FloatRange(min=0.01), help="Request = duty x allocation x headroom [1.2].")
@click.option("--pod-overhead", default="200m", show_default=True, help="Added to every pod's request for its broker.")
@click.option("--equal-cpu", help="CPU per rank before profiling [the pods' requests shared among the ranks].")
@click.option("--allocatable", help="The nodes' CPU for these pods [this machine's CPUs on local].")
@click.option("--boundary", help="MPI call that ends an iteration [MPI_Barrier].")
@click.option("--interval", default=1.0, show_default=True, type=click.FloatRange(min=0.05), help="Seconds per step.")
@click.option("--fairness-interval", default=5.0, show_default=True, type=click.FloatRange(min=0.1))
@click.option(
    "--settle",
    default=3.0,
    show_default=True,
    type=click.FloatRange(min=0.1),
    help="Seconds rates need after a change.",
)
@click.option("--start-timeout", default=60.0, show_default=True, type=click.FloatRange(min=1), help="Seconds.")
@click.option("--timeout", type=click.FloatRange(min=1), help="Give up (cancelling what runs) after this long.")
@click.option("--workdir", type=click.Path(file_okay=False), help="Output and traces (shared with the pods).")
@click.option("--timeline", type=click.Path(dir_okay=False), help="PNG timeline; the JSON-lines log goes beside it.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as one JSON object.")
@_backend_options
def multiplex(name: str, backend: str, context: str | None, namespace: str | None, **opts: Any) -> None:
    """Profile, resize in place, pack more simulations and keep them fair on MiniCluster NAME.

    \b
    Example:
      minicluster up examples/multiplex.yaml --detach
      minicluster multiplex multiplex --max 3 --timeline mux.png
    """
    from elasticity.control.events import EventLog
    from elasticity.control.multiplex import MultiplexConfig
    from elasticity.control.multiplex_runner import MultiplexRunner
    from elasticity.model.resources import cpu_millicores
    from miniclusters.multiplex.report import print_progress_line, print_summary, summary_json
    from miniclusters.multiplex.session import open_session, save_state, state_file

    with _errors():
        target = _open(backend, context, namespace)
        status = target.status(name)
        spec = _spec_defaults(target, name)
        command = opts["command"] or spec.get("command") or ""
        if not command.strip():
            raise click.UsageError("--command is required (or spec.multiplexing.command)")
        try:
            equal = cpu_millicores(opts["equal_cpu"]) if opts["equal_cpu"] else None
            allocatable = cpu_millicores(opts["allocatable"]) if opts["allocatable"] else None
            overhead = cpu_millicores(opts["pod_overhead"])
        except ValueError as exc:
            raise click.BadParameter(str(exc)) from None
        if allocatable is None:
            if backend != "local":
                raise click.UsageError("--allocatable is required on Kubernetes (the nodes' CPU for these pods)")
            allocatable = (len(os.sched_getaffinity(0)) or 1) * 1000
        ranks = opts["ranks"] or spec.get("ranks") or spec.get("tasks") or status.size
        if equal is None:
            current = sum(cpu_millicores(p.cpu_desired) for p in status.pods if p.cpu_desired)
            equal = max(1, (current - overhead * len(status.pods)) // ranks) if current else 1000
        max_n = opts["max_n"] or spec.get("max") or 4
        total = opts["total"] or spec.get("total") or max_n
        if total < max_n:
            raise click.BadParameter(f"--total {total} is below --max {max_n}", param_hint="--total")
        config = MultiplexConfig(
            ranks=ranks,
            pods=tuple(p.index for p in status.pods),
            cores_per_node=allocatable / 1000 / max(1, len({p.node for p in status.pods if p.node}) or 1),
            nodes=status.size,
            max_simulations=max_n,
            total_simulations=total,
            profile_iterations=opts["profile_iterations"] or spec.get("profileIterations") or 50,
            fairness=opts["fairness"] or spec.get("fairness") or 1.10,
            efficiency_threshold=opts["efficiency"] or spec.get("efficiencyThreshold") or 0.85,
            headroom=opts["headroom"] or spec.get("headroom") or 1.2,
            equal_per_rank_m=equal,
            fairness_interval=opts["fairness_interval"],
            start_timeout=opts["start_timeout"],
            pod_overhead_m=overhead,
            settle_time=opts["settle"],
        )
        workdir = Path(opts["workdir"] or spec.get("workdir") or tempfile.mkdtemp(prefix=f"mc-mux-{name}-"))
        boundary = opts["boundary"] or spec.get("boundary") or "MPI_Barrier"
        session = open_session(target, backend, name, command, config, workdir, boundary)
        timeline = Path(opts["timeline"]) if opts["timeline"] else workdir / "timeline.png"
        log_path = timeline.with_suffix(".jsonl")
        if log_path.exists():
            log_path.unlink()
        started = time.monotonic()
        clock = lambda: time.monotonic() - started  # noqa: E731
        state_path = state_file(backend, name)
        click.echo(
            f"multiplexing {name}: {config.ranks} ranks per simulation on {len(config.pods)} pods, "
            f"allocatable {allocatable}m, up to {max_n} at once ({total} in all); {session.shares_note}; "
            f"work directory {workdir}",
            err=True,
        )
        with EventLog(log_path, "multiplex", clock) as log:
            runner = MultiplexRunner(
                name, session.planner, session.observer, session.actuator, session.simulations, session.shares,
                clock=time.monotonic, log=log,
            )  # fmt: skip
            last: list[str] = []

            def on_progress(progress: Any) -> None:
                print_progress_line(progress, last)
                save_state(state_path, name, session, True)

            runner.on_progress = on_progress
            try:
                runner.run(interval=opts["interval"], timeout=opts["timeout"])
            except KeyboardInterrupt:
                for sim, rec in session.planner.sims.items():
                    if rec.state in ("pending", "running"):
                        session.simulations.cancel(sim, "interrupted")
                save_state(state_path, name, session, False)
                click.echo("interrupted: running simulations cancelled", err=True)
                sys.exit(130)
        identity_now = session.identity(name) if session.identity else {}
        same_pids = all(identity_now.get(i) == ident for i, ident in session.pod_identity.items())
        save_state(state_path, name, session, False, {"same_pids": same_pids})
        from elasticity.control.events import read_events
        from elasticity.figures.timeline import write_timeline

        write_timeline(list(read_events(log_path)), timeline, allocatable)
        click.echo(f"timeline written to {timeline} (events: {log_path})", err=True)
        if opts["as_json"]:
            click.echo(summary_json(session, same_pids))
        else:
            print_summary(session, same_pids)
        failed = [s for s in session.planner.sims.values() if s.state == "failed"]
        sys.exit(1 if failed and not any(s.state == "finished" for s in session.planner.sims.values()) else 0)
