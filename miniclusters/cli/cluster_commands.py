"""Cluster commands: down, status, scale, resize, logs, exec, list (`up` is up_command.py, the operator's are
operator_commands.py).

Thin shells over a Backend: every BackendError becomes its message on stderr and its exit code (1, or 2 for
bad input); nothing is changed when the input is wrong.
"""

from __future__ import annotations

import json
import sys

import click

from miniclusters.backends import available_backends
from miniclusters.backends.base import NotFoundError
from miniclusters.cli.arguments import command_words
from miniclusters.cli.backend_options import EXIT_INVALID, backend_errors, backend_options, open_backend, print_status
from miniclusters.cli.interrupts import exit_on_signals
from miniclusters.words import plural


@click.command()
@click.argument("name")
@backend_options
def down(name: str, backend: str, context: str | None, namespace: str | None) -> None:
    """Delete a MiniCluster and everything it owns.

    \b
    Example:
      minicluster down hello --backend kubernetes
    """
    with backend_errors():
        target = open_backend(backend, context, namespace)
        if target.ephemeral:  # this machine's controllers first: multiplexing cancels its simulations
            from miniclusters.cli.run_files import stop_controllers

            for line in stop_controllers(name):
                click.echo(line)
            from miniclusters.campaign.state_file import stop as stop_campaign

            stopped = stop_campaign(name)
            if stopped is not None:  # it cancelled its ensembles and tore the cluster down itself
                click.echo(f"cancelled the campaign (pid {stopped})")
                try:
                    target.status(name)
                except NotFoundError:
                    click.echo(f"deleted MiniCluster {name}")
                    return
        target.delete(name)
        if target.ephemeral:  # and what the run kept outside the cluster's directory
            from miniclusters.cli.run_files import remove_run_files

            remove_run_files(name, backend)
        click.echo(f"deleted MiniCluster {name}")


@click.command()
@click.argument("name")
@backend_options
@click.option(
    "-o",
    "--output",
    default="text",
    show_default=True,
    help="text, json, or jsonpath=TEMPLATE as kubectl reads it (e.g. jsonpath='{.rest_url}').",
)
def status(name: str, backend: str, context: str | None, namespace: str | None, output: str) -> None:
    """Pods, CPU wanted vs running, broker ranks and conditions of a MiniCluster.

    \b
    Example:
      minicluster status hello --backend kubernetes -o json
      minicluster status restful -o jsonpath='{.rest_url}'
    """
    from miniclusters.autoscaling.state import load_state as load_autoscaler
    from miniclusters.campaign.state_file import load_state as load_campaign
    from miniclusters.cli.autoscale_status import drain_report, print_autoscaler_state, print_drains
    from miniclusters.cli.burst_status import burst_report, print_bursts
    from miniclusters.cli.status_view import render_jsonpath, status_document
    from miniclusters.multiplex.state_file import load_state

    template = output.partition("=")[2] if output.startswith("jsonpath=") else None
    if output not in ("text", "json") and template is None:
        click.echo(f"error: -o {output!r}: expected text, json or jsonpath=TEMPLATE", err=True)
        sys.exit(EXIT_INVALID)
    with backend_errors():
        opened = open_backend(backend, context, namespace)
        result = opened.status(name)
        controller = load_state(backend, name)
        document = status_document(result)
        if controller is not None:
            document["multiplexing"] = controller
        bursts = burst_report(opened, result)  # burst ranks apart, and why pending jobs wait
        document["bursts"] = bursts
        autoscaler, drains = load_autoscaler(backend, name), drain_report(opened, result)
        document["autoscaling"], document["drained"] = autoscaler, drains
        campaign = load_campaign(name) if opened.ephemeral else None
        if campaign is not None:
            document["campaign"] = campaign
        if output == "json":
            click.echo(json.dumps(document, indent=2))
        elif template is not None:
            try:
                click.echo(render_jsonpath(document, template))
            except ValueError as exc:
                click.echo(f"error: -o jsonpath: {exc}", err=True)
                sys.exit(EXIT_INVALID)
        else:
            print_status(result)
            if bursts:
                print_bursts(bursts)
            if controller is not None:
                from miniclusters.multiplex.report import print_controller_state  # the planner: only when shown

                print_controller_state(controller)
            if drains:
                print_drains(drains)
            if autoscaler is not None:
                print_autoscaler_state(autoscaler)
            if campaign is not None:
                from miniclusters.cli.campaign_render import print_campaign_state

                print_campaign_state(campaign)


@click.command()
@click.argument("name")
@click.argument("size", type=int)
@backend_options
def scale(name: str, size: int, backend: str, context: str | None, namespace: str | None) -> None:
    """Set the number of pods, within [max(1, minSize), maxSize]; the lead (index 0) is never removed.

    \b
    Example:
      minicluster scale elastic 6 --backend kubernetes
    """
    with backend_errors():
        result = open_backend(backend, context, namespace).scale(name, size)
        click.echo(f"MiniCluster {name} scaled to {plural(size, 'pod')} ({result.running_pods} running now)")


@click.command()
@click.argument("name")
@click.argument("index", type=int)
@click.option("--cpu", required=True, help="New CPU request, e.g. 500m or 2.")
@backend_options
def resize(name: str, index: int, cpu: str, backend: str, context: str | None, namespace: str | None) -> None:
    """Change one pod's CPU request in place (no restart); report accepted/in-progress/deferred/infeasible/done.

    Exit code 1 when the node refused it (deferred or infeasible).

    \b
    Example:
      minicluster resize elastic 1 --cpu 250m --backend kubernetes
    """
    with backend_errors():
        result = open_backend(backend, context, namespace).resize(name, index, cpu)
        click.echo(f"pod {result.index} ({result.pod}): {result.outcome.value}: {result.message}")
        if not result.ok:
            sys.exit(1)


@click.command()
@click.argument("name")
@click.argument("index", type=int, default=0)
@click.option("-i", "--index", "index_option", type=int, help="Pod index (same as the INDEX argument).")
@click.option("-f", "--follow", is_flag=True, help="Keep streaming until the container (or job) ends.")
@click.option("--url", help="A lead broker's REST API: NAME is then a job id, and its output is printed.")
@backend_options
def logs(
    name: str,
    index: int,
    index_option: int | None,
    follow: bool,
    url: str | None,
    backend: str,
    context: str | None,
    namespace: str | None,
) -> None:
    """Print the broker container's output of pod INDEX (default 0, the lead), or a job's output (--url).

    \b
    Example:
      minicluster logs hello 0 --follow --backend kubernetes
      minicluster logs hello --index 2
      minicluster logs ƒ2Qr7MM9 --url http://10.213.0.2:5000 --follow
    """
    if url:
        from miniclusters.cli.rest_commands import print_job_output

        print_job_output(url, name, follow)
        return
    if index_option is not None:
        index = index_option
    with backend_errors():
        for line in open_backend(backend, context, namespace).logs(name, index, follow):
            click.echo(line)


@click.command(name="exec", context_settings={"ignore_unknown_options": True})
@click.argument("name")
@click.option("-i", "--index", type=int, default=0, show_default=True, help="Pod index (0 is the lead).")
@click.argument("argv", nargs=-1, required=True, type=click.UNPROCESSED, callback=command_words)
@backend_options
def exec_(
    name: str, index: int, argv: tuple[str, ...], backend: str, context: str | None, namespace: str | None
) -> None:
    """Run a command in a pod's broker container; exit with its exit code. Ending this (Ctrl-C, SIGTERM, a
    closed terminal) ends the command in the pod, and all it started, and exits 128 + the signal's number.

    \b
    Example:
      minicluster exec hello --backend kubernetes -- flux resource list
    """
    with backend_errors(), exit_on_signals(f"ending `{argv[0]}` in pod index {index}"):
        result = open_backend(backend, context, namespace).exec(name, index, list(argv))
    click.echo(result.stdout, nl=False)
    click.echo(result.stderr, nl=False, err=True)
    sys.exit(result.rc)


@click.command(name="list")
@backend_options
def list_(backend: str, context: str | None, namespace: str | None) -> None:
    """List MiniClusters with their size, ready pods and state.

    \b
    Example:
      minicluster list --backend kubernetes -n hpc
    """
    with backend_errors():
        clusters = open_backend(backend, context, namespace).list()
        click.echo(f"{'NAME':<24} {'NAMESPACE':<16} {'SIZE':>4} {'READY':>5}  STATE")
        for c in clusters:
            click.echo(f"{c.name:<24} {c.namespace:<16} {c.size:>4} {c.ready:>5}  {c.state}")


COMMANDS = (down, status, scale, resize, logs, exec_, list_)
__all__ = ["COMMANDS", "available_backends"]
