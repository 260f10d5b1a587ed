"""Cluster commands: up (also --restore), down, status, scale, resize, logs, exec, list (the operator's
are operator_commands.py).

Thin shells over a Backend: every BackendError becomes its message on stderr and its exit code (1, or 2 for
bad input); nothing is changed when the input is wrong.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import click

from miniclusters.api import SpecError, load_minicluster_file
from miniclusters.backends import DEFAULT_BACKEND, available_backends, get_backend
from miniclusters.backends.base import (
    Backend,
    BackendError,
    ClusterStatus,
    CreateOptions,
    NotFoundError,
    StartRefusedError,
)
from miniclusters.cli.arguments import command_words
from miniclusters.cli.interrupts import EXIT_INTERRUPTED, TeardownOnInterrupt, exit_on_signals
from miniclusters.cli.queue_archive import UNFIT_CHOICES, refuse_restore_into_existing, restore_spec
from miniclusters.render import RenderOptions, with_flavour
from miniclusters.words import plural

EXIT_INVALID = 2
BACKEND_ENV = "MINICLUSTER_BACKEND"


def _backend_options(func: Callable[..., Any]) -> Callable[..., Any]:
    func = click.option("-n", "--namespace", help="Kubernetes namespace (default: the context's).")(func)
    func = click.option("--context", help="kubeconfig context (kubernetes backend).")(func)
    func = click.option(
        "--backend",
        default=lambda: os.environ.get(BACKEND_ENV, DEFAULT_BACKEND),
        show_default=f"${BACKEND_ENV} or local",
        help="Where clusters run.",
    )(func)
    return func


def _open(backend: str, context: str | None, namespace: str | None, **extra: Any) -> Backend:
    """The backend called `backend`; each backend refuses the options it does not take, in words."""
    options = {k: v for k, v in extra.items() if v is not None}
    if context:
        options["context"] = context
    if namespace:
        options["namespace"] = namespace
    return get_backend(backend, **options)


@contextmanager
def _errors() -> Iterator[None]:
    """BackendError -> message and exit code, never a traceback."""
    try:
        yield
    except BackendError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(getattr(exc, "exit_code", 1))


def _print_status(status: ClusterStatus) -> None:
    from miniclusters.cli.status_view import render_status_text, status_document

    click.echo(render_status_text(status_document(status)))


PROGRESS_REPEAT_S = 10.0
"""While waiting for the same thing, `up` says so again only this often (not at every look)."""


def _progress_printer() -> Callable[[Any], None]:
    """One line when what `up` waits for changes (and every PROGRESS_REPEAT_S while it does not), on stderr."""
    from rich.console import Console

    console = Console(stderr=True, soft_wrap=True)  # one progress event, one line (no wrapping mid-word)
    last: list[Any] = []  # [what was said, when]

    def show(progress: Any) -> None:
        joined = "?" if progress.joined is None else str(progress.joined)
        said = (
            f"pods running {progress.running}/{progress.size}, brokers joined {joined}/{progress.size}: "
            f"{progress.message}"
        )
        if last and last[0] == said and progress.elapsed - last[1] < PROGRESS_REPEAT_S:
            return
        console.print(f"[{progress.elapsed:5.0f}s] {said}", highlight=False)
        last[:] = [said, progress.elapsed]

    return show


@click.command()
@click.argument("file", type=click.Path(dir_okay=False))
@_backend_options
@click.option("--registry", help="Registry of our images (default $MINICLUSTERS_REGISTRY or ghcr.io/miniclusters).")
@click.option("--tag", help="Tag of our images (default $MINICLUSTERS_TAG or the package version).")
@click.option(
    "--detach",
    "-d",
    is_flag=True,
    help="Return once the brokers have joined; do not follow the lead, nor start spec.multiplexing's controller "
    "(run `minicluster multiplex` yourself).",
)
@click.option("--timeout", type=float, default=600.0, show_default=True, help="Seconds to wait for pods and brokers.")
@click.option("--interactive", is_flag=True, help="Keep the brokers up with no command (sets spec.interactive).")
@click.option(
    "--keep", is_flag=True, help="local: leave the cluster's state after the lead finishes (default: tear down)."
)
@click.option(
    "--latency",
    help="local, as root: delay every packet leaving a pod by this much (e.g. 500us, 2ms): tc netem, or an "
    "NFQUEUE delay line where the kernel has no netem.",
)
@click.option(
    "--flavour",
    type=click.Choice(["builtin", "flux"]),
    help="Override spec.flux.flavour (local: `flux` runs flux-core from $FLUX_CORE_PREFIX, PATH or `make flux-core`).",
)
@click.option(
    "--restore", "restore", metavar="ARCHIVE", help="Restore the queue `minicluster save` wrote (job ids kept)."
)
@click.option(
    "--restore-unfit",
    type=click.Choice(UNFIT_CHOICES),
    help="A restored job that cannot fit this size: wait (with the reason) or reject (default: spec.archive.unfit).",
)
def up(
    file: str,
    backend: str,
    context: str | None,
    namespace: str | None,
    registry: str | None,
    tag: str | None,
    detach: bool,
    timeout: float,
    interactive: bool,
    keep: bool,
    latency: str | None,
    flavour: str | None,
    restore: str | None,
    restore_unfit: str | None,
) -> None:
    """Create a MiniCluster and wait until every pod runs and every broker has joined the lead.

    Then follow the lead's output until it finishes (exit code: the lead's), or return at once with --detach.
    Interactive clusters always return once up. On the local backend (the default) a finished cluster is torn
    down unless --keep, and Ctrl-C tears down what was started; a spec with autoscale or (without --detach)
    multiplexing enabled starts its controller in the background, stopped by `minicluster down`.

    \b
    Example:
      minicluster up examples/hello.yaml                      # local: 4 pods on this machine
      minicluster up examples/interactive.yaml --detach       # then: minicluster exec interactive -- flux resource list
      minicluster up examples/hello.yaml --flavour flux          # local: real flux-core brokers
      minicluster up examples/hello.yaml --backend kubernetes --namespace hpc
      minicluster up examples/save-restore.yaml --restore queue.tar.gz --restore-unfit reject
    """
    try:
        mc = load_minicluster_file(file)
    except SpecError as exc:
        click.echo(str(exc), err=True)
        sys.exit(EXIT_INVALID)
    if interactive and not mc.spec.interactive:
        mc = mc.model_copy(update={"spec": mc.spec.model_copy(update={"interactive": True})})
    mc = with_flavour(mc, flavour)
    defaults = RenderOptions()
    render = RenderOptions(namespace=None, registry=registry or defaults.registry, tag=tag or defaults.tag)
    with _errors():
        target = _open(backend, context, namespace, progress=_progress_printer(), latency=latency)
        if restore:
            refuse_restore_into_existing(mc.name, target.exists(mc))  # before the archive is read
            mc = restore_spec(mc, restore, restore_unfit, target.ephemeral)
        if mc.spec.campaign is not None:  # the whole campaign in the foreground (docs/campaign.md)
            from miniclusters.cli.campaign_commands import up_campaign

            if detach:
                click.echo(
                    "error: --detach: a campaign runs in the foreground (follow it from another shell with "
                    f"`minicluster campaign status {mc.name}`)",
                    err=True,
                )
                sys.exit(EXIT_INVALID)
            up_campaign(target, mc, CreateOptions(render=render, timeout=timeout), keep, None)
        if mc.spec.malleable is not None:  # the trace's jobs live, in the foreground (docs/malleable.md)
            from miniclusters.cli.malleable_commands import up_malleable

            if detach:
                click.echo("error: --detach: a malleable run runs in the foreground", err=True)
                sys.exit(EXIT_INVALID)
            up_malleable(target, backend, mc, CreateOptions(render=render, timeout=timeout), keep)
        if target.ephemeral:
            _up_ephemeral(target, mc, CreateOptions(render=render, timeout=timeout), detach, keep)
            if mc.spec.autoscale.enabled:  # still up (detached or interactive): its queue now drives its size
                from miniclusters.autoscaling.runner import start_in_background

                pid, events, png = start_in_background(mc.name, file, backend)
                click.echo(f"autoscaler: pid {pid}; events {events}; timeline {png} (stops at `minicluster down`)")
            if mc.spec.multiplexing.enabled and not detach:  # the controller packs simulations from now on
                from miniclusters.multiplex.background import start_in_background as start_multiplexer

                pid, events, png = start_multiplexer(mc.name, backend)
                click.echo(
                    f"multiplexing controller: pid {pid}; events {events}; timeline {png} "
                    "(see `minicluster status`; stops when its simulations are done or at `minicluster down`)"
                )
            return
        try:
            status = target.create(mc, CreateOptions(render=render, timeout=timeout))
        except StartRefusedError as exc:
            raise StartRefusedError(f"{exc}; remove it with `minicluster down {mc.name}`") from None
        _print_status(status)
        _print_restful(target, mc, status)
        if detach or mc.spec.interactive or status.finished:
            if status.finished:
                if not detach:  # it ended while `up` waited (a short job on a fast cluster): its output still
                    _print_lead_output(target, mc.name)
                sys.exit(0 if status.succeeded else 1)
            from miniclusters.cli.existing import reach_lines

            click.echo("reach it with:")
            click.echo("\n".join(reach_lines(mc.name, None)))
            return
        for line in target.logs(mc.name, 0, follow=True):
            click.echo(line)
        for _ in range(60):
            status = target.status(mc.name)
            if status.finished:
                break
            time.sleep(1.0)
        lead = status.pod(0)
        code = lead.exit_code if lead and lead.exit_code is not None else (0 if status.succeeded else 1)
        sys.exit(code)


def _print_lead_output(target: Backend, name: str) -> None:
    try:
        for line in target.logs(name, 0, follow=False):
            click.echo(line)
    except BackendError as exc:
        click.echo(f"(the lead's output is gone: {exc})", err=True)


def _answers(url: str, timeout: float) -> bool:
    """Poll until the server behind `url` answers (the lead starts it once the instance is online)."""
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=2.0).status_code < 500:
                return True
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    return False


def _print_restful(target: Backend, mc: Any, status: Any) -> None:
    """Where the lead broker's REST API answers, when the spec enables it."""
    if not mc.spec.restful.enabled:
        return
    endpoint = target.rest_endpoint(mc, status)
    if endpoint.url is None:
        click.echo(f"REST API: {endpoint.hint}")
    elif _answers(f"{endpoint.url}/openapi.json", timeout=20.0):
        if getattr(status, "rest_url", None) != endpoint.url:  # the status block above shows it already
            click.echo(f"REST API: {endpoint.url}   (e.g. minicluster jobs --url {endpoint.url})")
    else:
        click.echo(f"REST API: {endpoint.url} is not answering yet ({endpoint.hint})", err=True)


def _up_ephemeral(target: Backend, mc: Any, options: CreateOptions, detach: bool, keep: bool) -> None:
    """`up` where the cluster lives in this machine's processes: Ctrl-C (or SIGTERM) tears down what was started,
    and a second one does not cut that teardown short; the lead's exit code becomes ours."""
    stored = getattr(target, "stored_spec", lambda _name: None)(mc.name)
    if stored is not None:
        from miniclusters.cli.existing import existing_message

        code, lines = existing_message(target.status(mc.name), stored, mc.to_dict())
        for line in lines:
            click.echo(line, err=code != 0)
        sys.exit(code)
    created = False
    with TeardownOnInterrupt(f"tearing down MiniCluster {mc.name}"):
        try:
            try:
                status = target.create(mc, options)
            except StartRefusedError as exc:  # it can never come up: remove it, as a finished one is
                if keep:
                    msg = f"{exc}; kept (--keep): remove it with `minicluster down {mc.name}`"
                    raise StartRefusedError(msg) from None
                target.delete(mc.name)
                raise StartRefusedError(f"{exc}; MiniCluster {mc.name} was torn down") from None
            created = True
            _print_status(status)
            _print_restful(target, mc, status)
            if (detach or mc.spec.interactive) and not status.finished:
                from miniclusters.cli.existing import reach_lines

                click.echo("reach it with:")
                click.echo("\n".join(reach_lines(mc.name, status.rest_url)))
                created = False  # detached: it keeps running
                return
            for line in target.logs(mc.name, 0, follow=True):
                click.echo(line)
            status = target.status(mc.name)
            lead = status.pod(0)
            code = lead.exit_code if lead and lead.exit_code is not None else (0 if status.succeeded else 1)
            if not keep:
                target.delete(mc.name)
                created = False
            sys.exit(code)
        except KeyboardInterrupt:
            if created:  # also when Ctrl-C cut the normal teardown short: it resumes where it stopped
                with contextlib.suppress(NotFoundError):
                    target.delete(mc.name)
            else:  # create tears down what it started; finish that if Ctrl-C cut it short
                getattr(target, "finish_teardown", lambda _name: False)(mc.name)
            sys.exit(EXIT_INTERRUPTED)


@click.command()
@click.argument("name")
@_backend_options
def down(name: str, backend: str, context: str | None, namespace: str | None) -> None:
    """Delete a MiniCluster and everything it owns.

    \b
    Example:
      minicluster down hello --backend kubernetes
    """
    with _errors():
        target = _open(backend, context, namespace)
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
@_backend_options
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
    with _errors():
        opened = _open(backend, context, namespace)
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
            _print_status(result)
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
@_backend_options
def scale(name: str, size: int, backend: str, context: str | None, namespace: str | None) -> None:
    """Set the number of pods, within [max(1, minSize), maxSize]; the lead (index 0) is never removed.

    \b
    Example:
      minicluster scale elastic 6 --backend kubernetes
    """
    with _errors():
        result = _open(backend, context, namespace).scale(name, size)
        click.echo(f"MiniCluster {name} scaled to {plural(size, 'pod')} ({result.running_pods} running now)")


@click.command()
@click.argument("name")
@click.argument("index", type=int)
@click.option("--cpu", required=True, help="New CPU request, e.g. 500m or 2.")
@_backend_options
def resize(name: str, index: int, cpu: str, backend: str, context: str | None, namespace: str | None) -> None:
    """Change one pod's CPU request in place (no restart); report accepted/in-progress/deferred/infeasible/done.

    Exit code 1 when the node refused it (deferred or infeasible).

    \b
    Example:
      minicluster resize elastic 1 --cpu 250m --backend kubernetes
    """
    with _errors():
        result = _open(backend, context, namespace).resize(name, index, cpu)
        click.echo(f"pod {result.index} ({result.pod}): {result.outcome.value}: {result.message}")
        if not result.ok:
            sys.exit(1)


@click.command()
@click.argument("name")
@click.argument("index", type=int, default=0)
@click.option("-i", "--index", "index_option", type=int, help="Pod index (same as the INDEX argument).")
@click.option("-f", "--follow", is_flag=True, help="Keep streaming until the container (or job) ends.")
@click.option("--url", help="A lead broker's REST API: NAME is then a job id, and its output is printed.")
@_backend_options
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
    with _errors():
        for line in _open(backend, context, namespace).logs(name, index, follow):
            click.echo(line)


@click.command(name="exec", context_settings={"ignore_unknown_options": True})
@click.argument("name")
@click.option("-i", "--index", type=int, default=0, show_default=True, help="Pod index (0 is the lead).")
@click.argument("argv", nargs=-1, required=True, type=click.UNPROCESSED, callback=command_words)
@_backend_options
def exec_(
    name: str, index: int, argv: tuple[str, ...], backend: str, context: str | None, namespace: str | None
) -> None:
    """Run a command in a pod's broker container; exit with its exit code. Ending this (Ctrl-C, SIGTERM, a
    closed terminal) ends the command in the pod, and all it started, and exits 128 + the signal's number.

    \b
    Example:
      minicluster exec hello --backend kubernetes -- flux resource list
    """
    with _errors(), exit_on_signals(f"ending `{argv[0]}` in pod index {index}"):
        result = _open(backend, context, namespace).exec(name, index, list(argv))
    click.echo(result.stdout, nl=False)
    click.echo(result.stderr, nl=False, err=True)
    sys.exit(result.rc)


@click.command(name="list")
@_backend_options
def list_(backend: str, context: str | None, namespace: str | None) -> None:
    """List MiniClusters with their size, ready pods and state.

    \b
    Example:
      minicluster list --backend kubernetes -n hpc
    """
    with _errors():
        clusters = _open(backend, context, namespace).list()
        click.echo(f"{'NAME':<24} {'NAMESPACE':<16} {'SIZE':>4} {'READY':>5}  STATE")
        for c in clusters:
            click.echo(f"{c.name:<24} {c.namespace:<16} {c.size:>4} {c.ready:>5}  {c.state}")


COMMANDS = (up, down, status, scale, resize, logs, exec_, list_)
__all__ = ["COMMANDS", "available_backends"]
