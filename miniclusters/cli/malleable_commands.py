"""`minicluster up` of a MiniCluster with spec.malleable: bring it up, run the trace live, report, tear down."""

from __future__ import annotations

import sys

import click

from miniclusters.api.errors import SpecError
from miniclusters.api.spec import MiniCluster
from miniclusters.backends.base import Backend, BackendError, CreateOptions
from miniclusters.cli.interrupts import TeardownOnInterrupt

EXIT_INVALID = 2


BACKENDS = ("local", "podman", "kubernetes")


def up_malleable(target: Backend, backend: str, mc: MiniCluster, options: CreateOptions, keep: bool) -> None:
    """The whole live run in the foreground; exits 0 when every job finished with its rigid run's answer."""
    from miniclusters.malleable.session import claim_workdir, in_containers

    if backend not in BACKENDS:
        click.echo(f"error: --backend {backend}: spec.malleable runs live on {', '.join(BACKENDS)}", err=True)
        sys.exit(EXIT_INVALID)
    if target.exists(mc):
        click.echo(f"error: MiniCluster {mc.name} exists; remove it with `minicluster down {mc.name}`", err=True)
        sys.exit(1)
    interactive = mc.model_copy(update={"spec": mc.spec.model_copy(update={"interactive": True})})
    containers = backend != "local"
    try:  # a work directory holding someone else's files is refused before anything starts
        interactive = in_containers(interactive) if containers else interactive
        claim_workdir(interactive)
    except SpecError as exc:
        click.echo(str(exc), err=True)
        sys.exit(EXIT_INVALID)
    with TeardownOnInterrupt(f"cancelling the malleable run and tearing down MiniCluster {mc.name}"):
        created = False
        try:
            status = target.create(interactive, options)
            created = True
            click.echo(f"MiniCluster {mc.name} up: {status.size} nodes")
            code = _run(target, interactive, containers, _lead_flux(backend))
        except BackendError as exc:
            click.echo(f"error: {exc}", err=True)
            code = 1
        finally:
            if created and not keep:
                target.delete(mc.name)
                click.echo(f"MiniCluster {mc.name} down")
    sys.exit(code)


def _lead_flux(backend: str) -> tuple[str, ...]:
    """argv running `flux` against the lead broker, in the lead pod (Kubernetes: at whichever socket it opened)."""
    if backend == "kubernetes":
        from miniclusters.autoscaling.queue import lead_flux

        return tuple(lead_flux())
    return ("flux",)


def _run(target: Backend, mc: MiniCluster, containers: bool, flux: tuple[str, ...]) -> int:
    from elasticity.control.events import read_events
    from elasticity.figures.malleable import plot_live
    from elasticity.policy.scheduling.registry import policy_named
    from elasticity.sim.engine import simulate
    from miniclusters.malleable.report import (
        JOB_HEADER,
        comparison_lines,
        job_rows,
        resize_overhead,
        start_overhead,
        table,
    )
    from miniclusters.malleable.session import run_live

    run = run_live(target, mc, click.echo, containers=containers, flux=flux)
    loop = run.loop
    states = list(loop.states.values())
    names = [s.job.name for s in states]
    sizes = [f"[{s.job.size.min},{s.job.size.pref},{s.job.size.max}]" for s in states]
    reasons = {s.job.name: s.reason for s in states if s.reason}
    for line in table(job_rows(run.result.records, names, sizes, run.answers, reasons), JOB_HEADER):
        click.echo(line)
    launch = start_overhead(loop)
    resize = resize_overhead(loop, read_events(run.port.workdir / "events.jsonl"), launch)
    predicted = simulate(run.workload, policy_named(loop.policy_name), policy_name=loop.policy_name,
                         rescale_overhead=resize, start_overhead=launch)  # fmt: skip
    click.echo(f"simulated with the costs measured in this run: a start {launch:.2f} s, a resize {resize:.2f} s")
    for line in comparison_lines({f"live {loop.policy_name}": run.result, f"simulated {loop.policy_name}": predicted}):
        click.echo(line)
    png = run.port.workdir / "timeline.png"
    title = f"{run.workload.name}: {len(states)} jobs live under {loop.policy_name} on {loop.nodes} nodes"
    busy = {"live": run.result.busy, "simulated": predicted.busy}
    plot_live({s.job.name: s.history for s in states}, busy, loop.nodes, title, png)
    click.echo(f"timeline {png}; events {run.port.workdir / 'events.jsonl'}")
    done = sum(s.phase == "done" for s in states)
    click.echo(f"malleable run: {done}/{len(states)} jobs done, {loop.resizes} resizes, answers "
               f"{'equal to the rigid runs' if run.answers_equal else 'NOT all equal to the rigid runs'}")  # fmt: skip
    return 0 if done == len(states) and run.answers_equal else 1
