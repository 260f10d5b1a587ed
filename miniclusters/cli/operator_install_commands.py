"""`minicluster operator install | uninstall | status`: the operator in a cluster, through the API
(miniclusters/operator/install.py). `kubectl apply --server-side -k crds` applies the same objects."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import click

from miniclusters.render import RenderOptions

if TYPE_CHECKING:
    from miniclusters.backends.kubernetes.api import KubeApi
    from miniclusters.operator.metrics_api import MetricsTLS


@contextmanager
def _install_errors() -> Iterator[None]:
    """An unreachable cluster or a refused call: one line naming it and exit 1, never a traceback."""
    from miniclusters.backends.base import BackendError
    from miniclusters.operator.install import InstallError

    try:
        yield
    except (InstallError, BackendError) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(getattr(exc, "exit_code", 1))


def _api(context: str | None) -> KubeApi:
    from miniclusters.backends.kubernetes.client import RealKubeApi

    return RealKubeApi.from_kubeconfig(context, None)


def _say(text: str) -> None:
    click.echo(text, err=True)


@click.command()
@click.option("--context", help="kubeconfig context (default: the current one).")
@click.option("--registry", help="Registry of our images (default: ghcr.io/miniclusters).")
@click.option("--tag", help="Tag of our images.")
@click.option("--accept-flux-operator-kind", is_flag=True, help="Also reconcile flux-framework.org/v1alpha2 objects.")
@click.option(
    "--campaign-volume",
    metavar="PATH | CLAIM=PATH",
    help="Mount this volume in the operator at PATH (a directory of the node, or a ReadWriteMany claim): "
    "campaigns whose spec.campaign.workdir lies on it can run (the operator then runs as uid 0, without any "
    "capability).",
)
@click.option(
    "--custom-metrics",
    is_flag=True,
    help="Also serve the custom metrics API (custom.metrics.k8s.io/v1beta2: every MiniCluster's queue and nodes) "
    "behind the API server's aggregator, for HorizontalPodAutoscalers on a MiniCluster's /scale. A cluster has one "
    "custom metrics API: not beside another adapter (prometheus-adapter, flux-metrics-api).",
)
@click.option("--timeout", type=click.FloatRange(min=1), default=180, show_default=True, help="Seconds to wait.")
def install(
    context: str | None,
    registry: str | None,
    tag: str | None,
    accept_flux_operator_kind: bool,
    campaign_volume: str | None,
    custom_metrics: bool,
    timeout: float,
) -> None:
    """Install the operator: the CRD, its namespace, ServiceAccount, RBAC and Deployment (server-side apply), and
    wait until it is available. Running it again converges (a new --tag rolls the Deployment).

    \b
    Example:
      minicluster operator install
      kubectl apply -f examples/hello.yaml && kubectl get miniclusters -w
      minicluster operator install --campaign-volume /srv/campaigns     # campaigns' work directories there
    """
    from miniclusters.operator import install as installer
    from miniclusters.operator.manifests import NAMESPACE, CampaignVolume

    try:
        volume = CampaignVolume.parse(campaign_volume) if campaign_volume is not None else None
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--campaign-volume") from None
    defaults = RenderOptions()
    options = RenderOptions(registry=registry or defaults.registry, tag=tag or defaults.tag)
    with _install_errors():
        tls = _metrics_tls(NAMESPACE) if custom_metrics else None
        objects = installer.install_objects(options, accept_flux_operator_kind, volume, tls)
        installer.install(_api(context), objects, _say, timeout=timeout)
    click.echo(f"operator installed in namespace {NAMESPACE}")


def _metrics_tls(namespace: str) -> MetricsTLS:
    """A CA and the serving certificate of the custom metrics Service (its DNS names), made here: the APIService
    carries the CA so the aggregator verifies the operator (no insecureSkipTLSVerify)."""
    import tempfile
    from pathlib import Path

    from miniclusters.operator.metrics_api import MetricsTLS, service_names

    try:
        from miniclusters.localkube.pki import Authority, Identity
    except ImportError:
        click.echo("error: --custom-metrics makes a certificate: pip install 'miniclusters[kube]'", err=True)
        sys.exit(1)
    with tempfile.TemporaryDirectory() as folder:
        authority = Authority(Path(folder), "metrics-ca", "miniclusters custom metrics CA")
        names = service_names(namespace)
        issued = authority.issue(Identity("metrics", names[2], client=False, server=True, dns_names=names))
        return MetricsTLS(
            issued.certificate.read_bytes(), issued.key.read_bytes(), authority.issued.certificate.read_bytes()
        )


@click.command()
@click.option("--context", help="kubeconfig context (default: the current one).")
@click.option(
    "--delete-miniclusters",
    is_flag=True,
    help="Also delete every MiniCluster (and its running jobs); without it, uninstall refuses while any exist.",
)
@click.option("--timeout", type=click.FloatRange(min=1), default=180, show_default=True, help="Seconds to wait.")
def uninstall(context: str | None, delete_miniclusters: bool, timeout: float) -> None:
    """Remove what install applied, the Deployment first and the CRD last, waiting until each is gone; also the
    tenants' ClusterRole and RoleBindings that `minicluster manifests --tenant` made (their namespaces stay).

    \b
    Example:
      minicluster operator uninstall
    """
    from miniclusters.operator import install as installer

    with _install_errors():
        api = _api(context)
        objects = [*installer.removable_objects(), *installer.tenant_objects_in(api)]
        installer.uninstall(api, objects, _say, delete_miniclusters=delete_miniclusters, timeout=timeout)
    click.echo("operator uninstalled")


@click.command()
@click.option("--context", help="kubeconfig context (default: the current one).")
@click.option("-o", "--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
def status(context: str | None, output: str) -> None:
    """Whether the operator is installed and available: the CRD, the Deployment, each operator pod. Exit 1 when
    it is not available.

    \b
    Example:
      minicluster operator status
    """
    from dataclasses import asdict

    from miniclusters.api.crd import CRD_NAME
    from miniclusters.operator import install as installer
    from miniclusters.operator.manifests import NAME, NAMESPACE

    with _install_errors():
        state = installer.operator_state(_api(context))
    if output == "json":
        click.echo(json.dumps({**asdict(state), "available": state.available}, indent=2))
    else:
        click.echo(f"CRD {CRD_NAME}: {'established' if state.crd else 'missing'}")
        click.echo(f"Deployment {NAMESPACE}/{NAME}: {state.summary()}")
        if state.image:
            click.echo(f"image: {state.image}")
        if state.deployment:
            click.echo(f"leader: {state.leader or 'none (no replica holds the Lease)'}")
        for pod in state.pods:
            line = f"  pod {pod['name']}: {pod['reason']}, {pod['restarts']} restarts"
            click.echo(f"{line}: {pod['message']}" if pod["message"] else line)
    if not state.available:
        sys.exit(1)


SUBCOMMANDS = (install, uninstall, status)
