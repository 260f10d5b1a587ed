"""`minicluster up`: create a MiniCluster, wait for its pods and brokers, then follow the lead (split from
cluster_commands.py, which holds the other cluster verbs).

A thin shell over a Backend: every BackendError becomes its message on stderr and its exit code (1, or 2 for
bad input); nothing is changed when the input is wrong.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable
from typing import Any

import click

from miniclusters.api import SpecError, load_minicluster_file
from miniclusters.api.spec import MiniCluster
from miniclusters.backends.base import Backend, BackendError, CreateOptions, NotFoundError, StartRefusedError
from miniclusters.cli.backend_options import (
    EXIT_INVALID,
    backend_errors,
    backend_options,
    open_backend,
    print_status,
    reach_scope,
)
from miniclusters.cli.interrupts import EXIT_INTERRUPTED, TeardownOnInterrupt
from miniclusters.cli.queue_archive import UNFIT_CHOICES, refuse_restore_into_existing, restore_spec
from miniclusters.render import RenderOptions, with_flavour

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
@backend_options
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
    mc = _load(file, interactive, flavour)
    defaults = RenderOptions()
    render = RenderOptions(namespace=None, registry=registry or defaults.registry, tag=tag or defaults.tag)
    options = CreateOptions(render=render, timeout=timeout)
    with backend_errors():
        target = open_backend(backend, context, namespace, progress=_progress_printer(), latency=latency)
        if restore:
            refuse_restore_into_existing(mc.name, target.exists(mc))  # before the archive is read
            mc = restore_spec(mc, restore, restore_unfit, target.ephemeral)
        _up_foreground_runs(target, backend, mc, options, detach, keep)
        if target.ephemeral:
            _up_ephemeral(target, mc, options, detach, keep, reach_scope(backend, context, None))
            _start_loops(mc, file, backend, detach)
            return
        _up_remote(target, mc, options, detach, lambda: reach_scope(backend, context, _created_in(target, backend)))


def _created_in(target: Backend, backend: str) -> str | None:
    """The Kubernetes namespace create went to (--namespace, the file's, the context's); None elsewhere."""
    if backend != "kubernetes":
        return None
    return str(getattr(target, "namespace", "")) or None


def _load(file: str, interactive: bool, flavour: str | None) -> MiniCluster:
    """The spec of FILE with --interactive and --flavour applied; a spec in error exits 2 with its problems."""
    try:
        mc = load_minicluster_file(file)
    except SpecError as exc:
        click.echo(str(exc), err=True)
        sys.exit(EXIT_INVALID)
    if interactive and not mc.spec.interactive:
        mc = mc.model_copy(update={"spec": mc.spec.model_copy(update={"interactive": True})})
    return with_flavour(mc, flavour)


def _up_foreground_runs(
    target: Backend, backend: str, mc: MiniCluster, options: CreateOptions, detach: bool, keep: bool
) -> None:
    """A campaign (docs/campaign.md) or a malleable run (docs/malleable.md): the whole run in the foreground."""
    if mc.spec.campaign is not None:
        from miniclusters.cli.campaign_commands import up_campaign

        if detach:
            click.echo(
                "error: --detach: a campaign runs in the foreground (follow it from another shell with "
                f"`minicluster campaign status {mc.name}`)",
                err=True,
            )
            sys.exit(EXIT_INVALID)
        up_campaign(target, mc, options, keep, None)
    if mc.spec.malleable is not None:
        from miniclusters.cli.malleable_commands import up_malleable

        if detach:
            click.echo("error: --detach: a malleable run runs in the foreground", err=True)
            sys.exit(EXIT_INVALID)
        up_malleable(target, backend, mc, options, keep)


def _start_loops(mc: MiniCluster, file: str, backend: str, detach: bool) -> None:
    """A local cluster still up (detached or interactive): its autoscaler and multiplexing controller start."""
    if mc.spec.autoscale.enabled:  # its queue now drives its size
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


def _up_remote(
    target: Backend, mc: MiniCluster, options: CreateOptions, detach: bool, scope: Callable[[], str]
) -> None:
    """`up` where the cluster outlives this process (Kubernetes, podman): follow the lead, or say how to reach it
    (`scope`: the options that find it again, read once create has chosen its namespace)."""
    try:
        status = target.create(mc, options)
    except StartRefusedError as exc:
        raise StartRefusedError(f"{exc}; remove it with `minicluster down {mc.name} {scope()}`") from None
    print_status(status)
    _print_restful(target, mc, status)
    if detach or mc.spec.interactive or status.finished:
        if status.finished:
            if not detach:  # it ended while `up` waited (a short job on a fast cluster): its output still
                _print_lead_output(target, mc.name)
            sys.exit(0 if status.succeeded else 1)
        from miniclusters.cli.existing import reach_lines

        click.echo("reach it with:")
        click.echo("\n".join(reach_lines(mc.name, None, scope())))
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


def _up_ephemeral(target: Backend, mc: Any, options: CreateOptions, detach: bool, keep: bool, scope: str) -> None:
    """`up` where the cluster lives in this machine's processes: Ctrl-C (or SIGTERM) tears down what was started,
    and a second one does not cut that teardown short; the lead's exit code becomes ours. `scope`: the options
    that find the cluster again, in what it prints."""
    at = f"{mc.name} {scope}".rstrip()
    stored = getattr(target, "stored_spec", lambda _name: None)(mc.name)
    if stored is not None:
        from miniclusters.cli.existing import existing_message

        code, lines = existing_message(target.status(mc.name), stored, mc.to_dict(), scope)
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
                    msg = f"{exc}; kept (--keep): remove it with `minicluster down {at}`"
                    raise StartRefusedError(msg) from None
                target.delete(mc.name)
                raise StartRefusedError(f"{exc}; MiniCluster {mc.name} was torn down") from None
            created = True
            print_status(status)
            _print_restful(target, mc, status)
            if (detach or mc.spec.interactive) and not status.finished:
                from miniclusters.cli.existing import reach_lines

                click.echo("reach it with:")
                click.echo("\n".join(reach_lines(mc.name, status.rest_url, scope)))
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


COMMANDS = (up,)
