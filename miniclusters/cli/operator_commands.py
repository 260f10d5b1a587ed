"""The operator's commands: run it (`operator`), install it in a cluster (`operator install | uninstall | status`)
and print its deployment manifests (`manifests`)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from miniclusters.cli.backend_options import backend_errors
from miniclusters.cli.interrupts import EXIT_INTERRUPTED
from miniclusters.render import RenderOptions

if TYPE_CHECKING:
    from broker.rest.metrics import SourceFor
    from miniclusters.backends.kubernetes.api import KubeApi
    from miniclusters.operator.autoscaling import PortsFor


@click.group(invoke_without_command=True)
@click.option("--context", help="kubeconfig context (default: in-cluster config, else the current context).")
@click.option(
    "-n", "--namespace", "namespaces", multiple=True, help="Watch only this namespace (repeat for several: tenants)."
)
@click.option("-A", "--all-namespaces", is_flag=True, help="Watch every namespace (the Deployment's default).")
@click.option("--accept-flux-operator-kind", is_flag=True, help="Also reconcile flux-framework.org/v1alpha2 objects.")
@click.option("--registry", help="Registry of our images.")
@click.option("--tag", help="Tag of our images.")
@click.option(
    "--leader-elect",
    is_flag=True,
    help="Reconcile only while holding the Lease (coordination.k8s.io) miniclusters-operator: run several "
    "replicas, one leads, another takes over within seconds when it is gone.",
)
@click.option(
    "--leader-elect-namespace",
    envvar="POD_NAMESPACE",
    default="miniclusters-system",
    show_default=True,
    help="Where the Lease lives [env POD_NAMESPACE].",
)
@click.option(
    "--custom-metrics-port",
    type=click.IntRange(1, 65535),
    help="Serve the custom metrics API (custom.metrics.k8s.io, for HorizontalPodAutoscalers) on this port.",
)
@click.option(
    "--custom-metrics-tls",
    type=click.Path(file_okay=False),
    help="Directory with tls.crt and tls.key for --custom-metrics-port.",
)
@click.pass_context
def operator(
    ctx: click.Context,
    context: str | None,
    namespaces: tuple[str, ...],
    all_namespaces: bool,
    accept_flux_operator_kind: bool,
    registry: str | None,
    tag: str | None,
    leader_elect: bool,
    leader_elect_namespace: str,
    custom_metrics_port: int | None,
    custom_metrics_tls: str | None,
) -> None:
    """Run the MiniCluster operator: reconcile MiniCluster objects until interrupted.

    It also autoscales every MiniCluster whose spec says `autoscale: {enabled: true}` (as
    `minicluster autoscale` would), reporting each decision as an Event and the `Autoscaling` condition, and
    runs the multiplexing controller of every ready MiniCluster with `multiplexing: {enabled: true}` (as
    `minicluster multiplex` would), reporting as Events and the `Multiplexing` condition.

    With a command, it installs the operator in the cluster, removes it, or says how it is.

    \b
    Example:
      minicluster operator --all-namespaces
      minicluster operator install                # or: kubectl apply --server-side -k crds
    """
    if ctx.invoked_subcommand is not None:
        return
    import logging
    import signal
    import threading

    from miniclusters.backends.kubernetes.client import RealKubeApi
    from miniclusters.operator.controller import Controller

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    defaults = RenderOptions()
    options = RenderOptions(registry=registry or defaults.registry, tag=tag or defaults.tag)
    if all_namespaces and namespaces:
        raise click.UsageError("give --all-namespaces or --namespace, not both")
    if (custom_metrics_port is None) != (custom_metrics_tls is None):
        raise click.UsageError("--custom-metrics-port and --custom-metrics-tls go together")
    with backend_errors():
        api = RealKubeApi.from_kubeconfig(context, namespaces[0] if namespaces else None)
        from miniclusters.backends.kubernetes.backend import KubernetesBackend
        from miniclusters.campaign.kube import kubernetes_campaign_starter
        from miniclusters.multiplex.kube_loop import kubernetes_multiplex_starter

        KubernetesBackend(api=api).check_crd()
        scopes: list[str | None] = [None] if all_namespaces else list(dict.fromkeys(namespaces)) or [api.namespace]
        # one controller per namespace: with RoleBindings in tenant namespaces only, a cluster-wide watch is refused
        controllers = [
            Controller(
                api,
                namespace=scope,
                options=options,
                accept_flux_kind=accept_flux_operator_kind,
                autoscale_ports=kubernetes_autoscale_ports(api),
                multiplex_start=kubernetes_multiplex_starter(api),
                campaign_start=kubernetes_campaign_starter(api),
            )
            for scope in scopes
        ]
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        if custom_metrics_port is not None and custom_metrics_tls is not None:  # every replica answers (read-only)
            from miniclusters.operator import metrics_api

            metrics_api.serve(kubernetes_metrics_source(api), custom_metrics_port, custom_metrics_tls, stop)
        _say_ready()  # a candidate is ready too: it serves by taking over

        def serve(until: threading.Event) -> None:
            threads = [
                threading.Thread(target=c.run, args=(until,), name=f"operator-{c.namespace}", daemon=True)
                for c in controllers
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()

        interrupted = False
        try:
            if leader_elect:
                from miniclusters.operator.leader import LeaderElector

                elector = LeaderElector(api, leader_elect_namespace, _identity())
                logging.getLogger("miniclusters.operator").info(
                    "%s: waiting for the Lease %s/%s", elector.identity, elector.namespace, elector.name
                )
                if not elector.run(stop, serve):
                    raise click.ClickException("lost the operator's Lease: stopped leading (the pod restarts)")
            else:
                serving = threading.Thread(target=serve, args=(stop,), name="operator", daemon=True)
                serving.start()
                while serving.is_alive():
                    serving.join(timeout=0.5)
        except KeyboardInterrupt:
            interrupted = True
            stop.set()
        if interrupted:  # Ctrl-C: the controllers stopped cleanly, and the exit code says how they were stopped
            sys.exit(EXIT_INTERRUPTED)


def _identity() -> str:
    """This replica's name in the Lease: its pod (POD_NAME, from the Deployment) or host, and this run of it (a
    restarted container is another candidate, not the leader it was: its pid would be 1 again)."""
    import os
    import socket
    import uuid

    return f"{os.environ.get('POD_NAME') or socket.gethostname()}_{uuid.uuid4().hex[:8]}"


def _say_ready() -> None:
    """Touch the file the Deployment's readiness probe looks for (only where the Deployment names one)."""
    import os

    from miniclusters.operator.manifests import READY_FILE_ENV

    path = os.environ.get(READY_FILE_ENV)
    if path:
        Path(path).touch()


def kubernetes_metrics_source(api: KubeApi) -> SourceFor:
    """The custom metrics of a MiniCluster, read in its lead pod (`python3 -m broker.rest.metrics` from the broker
    bundle at the broker's socket): the values its own REST server would serve."""
    import json

    from miniclusters.backends.base import NotFoundError
    from miniclusters.backends.kubernetes.backend import KubernetesBackend
    from miniclusters.backends.kubernetes.lead import LEAD_RUNDIR
    from miniclusters.backends.overlay import with_lead_socket
    from miniclusters.render.layout import BROKER_INSTALL_DIR

    argv = with_lead_socket(LEAD_RUNDIR, [f"{BROKER_INSTALL_DIR}/bin/python3", "-m", "broker.rest.metrics"])

    def read(kind: str, namespace: str | None, name: str) -> dict[str, int]:
        if kind != "MiniCluster" or namespace is None:
            raise LookupError(f"only a MiniCluster's queue and nodes are measured here, not a {kind}'s")
        try:
            result = KubernetesBackend(api=api, namespace=namespace).exec(name, 0, argv, timeout=30)
        except NotFoundError as exc:
            raise LookupError(str(exc)) from None
        if result.rc != 0:
            raise RuntimeError((result.stderr or result.stdout).strip()[-300:] or f"exit {result.rc}")
        return {str(k): int(v) for k, v in json.loads(result.stdout).items()}

    return read


def kubernetes_autoscale_ports(api: KubeApi) -> PortsFor:
    """The operator's autoscalers act like `minicluster autoscale`: the backend's actuator (the one writer of a
    cluster's size) and the lead's queue through exec."""
    from miniclusters.autoscaling.queue import ExecQueue, lead_flux
    from miniclusters.backends.kubernetes.backend import KubernetesBackend
    from miniclusters.backends.ports import ports_for
    from miniclusters.operator.autoscaling import AutoscalePorts

    def ports(namespace: str) -> AutoscalePorts:
        backend = KubernetesBackend(api=api, namespace=namespace)
        observer, actuator = ports_for(backend)
        return AutoscalePorts(observer, actuator, ExecQueue(backend, lambda _n: lead_flux()))

    return ports


@click.command()
@click.option("--output", type=click.Path(dir_okay=False), help="Write to this file instead of stdout.")
@click.option("--registry", help="Registry of our images.")
@click.option("--tag", help="Tag of our images.")
@click.option(
    "--tenant",
    "tenants",
    multiple=True,
    metavar="NAMESPACE[=USER]",
    help="One namespace per tenant (repeat): the operator is bound in and watches only these; USER (default: the "
    "namespace's name) may run MiniClusters there.",
)
def manifests(output: str | None, registry: str | None, tag: str | None, tenants: tuple[str, ...]) -> None:
    """Print the operator's deployment manifests (namespace, ServiceAccount, RBAC, Deployment).

    \b
    Example:
      minicluster crd | kubectl apply --server-side -f -
      minicluster manifests | kubectl apply --server-side -f -
      minicluster manifests --tenant alice --tenant team-b=bob | kubectl apply --server-side -f -
    """
    from miniclusters.operator.tenants import Tenant, TenantError

    try:
        parsed = [Tenant.parse(text) for text in tenants]
    except TenantError as exc:
        raise click.BadParameter(str(exc).removeprefix("--tenant "), param_hint="--tenant") from None
    if len({t.namespace for t in parsed}) != len(parsed):
        raise click.BadParameter("a namespace is given twice", param_hint="--tenant")
    from miniclusters.cli.spec_commands import dump_yaml_stream
    from miniclusters.operator.manifests import build_manifests

    defaults = RenderOptions()
    options = RenderOptions(registry=registry or defaults.registry, tag=tag or defaults.tag)
    text = dump_yaml_stream(dict(m) for m in build_manifests(options, tenants=parsed))
    if output:
        Path(output).write_text(text, encoding="utf-8")
        click.echo(f"wrote {output}", err=True)
    else:
        click.echo(text, nl=False)


def _add_subcommands() -> None:
    from miniclusters.cli.operator_install_commands import SUBCOMMANDS

    for command in SUBCOMMANDS:
        operator.add_command(command)


_add_subcommands()

COMMANDS = (operator, manifests)
