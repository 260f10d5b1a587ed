"""`minicluster kube up | down | status`: a one-node Kubernetes on this machine (docs/kubernetes.md)."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING

import click

from miniclusters.render import RenderOptions

if TYPE_CHECKING:
    from miniclusters.localkube.layout import Layout


def _layout() -> Layout:
    try:
        from miniclusters.localkube.layout import Layout
    except ImportError as error:  # the `kube` extra: cryptography, dnspython
        raise click.ClickException(f"{error}: install miniclusters[kube]") from None
    return Layout()


def _say(message: str) -> None:
    click.echo(f"kube: {message}", err=True)


@click.group()
def kube() -> None:
    """A one-node Kubernetes built here (`make kube`): its control plane, kubelet, containerd and CoreDNS.

    \b
    Example:
      make kube images && minicluster kube up
      kubectl --kubeconfig /var/lib/miniclusters/kube/admin.kubeconfig get nodes
      minicluster kube down
    """


@kube.command()
@click.option("--registry", help="Registry of our images to import (default: the one `make images` tags).")
@click.option("--tag", help="Tag of our images to import.")
def up(registry: str | None, tag: str | None) -> None:
    """Start the cluster (or say it runs) and print its kubeconfig's path on stdout."""
    from miniclusters.localkube.cluster import KubeError
    from miniclusters.localkube.cluster import up as bring_up
    from miniclusters.localkube.images import ImageMissing

    layout = _layout()
    defaults = RenderOptions()
    start = time.monotonic()
    try:
        started = bring_up(layout, registry or defaults.registry, tag or defaults.tag, _say)
    except (KubeError, ImageMissing) as error:
        raise click.ClickException(str(error)) from None
    if started:
        _say(f"cluster up in {time.monotonic() - start:.1f}s; node {layout.node_name} Ready")
    else:
        _say("already up (images podman rebuilt, if any, imported again)")
    click.echo(str(layout.kubeconfig))


@kube.command()
def down() -> None:
    """Stop the cluster and remove its pods, mounts, interfaces, iptables rules and state (images stay)."""
    from miniclusters.localkube.cluster import KubeError
    from miniclusters.localkube.cluster import down as bring_down

    try:
        bring_down(_layout(), _say)
    except KubeError as error:
        raise click.ClickException(str(error)) from None
    _say("down")


@kube.command()
def status() -> None:
    """Each component's pid and whether the node is Ready; exit 1 when the cluster is not up."""
    from miniclusters.localkube.cluster import status as read_status

    layout = _layout()
    listed, ready = read_status(layout)
    for item in listed:
        click.echo(f"{item.name:<24} {'running (pid ' + str(item.pid) + ')' if item.pid else 'stopped'}")
    click.echo(f"{'node ' + layout.node_name:<24} {'Ready' if ready else 'not ready'}")
    if ready:
        click.echo(f"{'kubeconfig':<24} {layout.kubeconfig}")
    sys.exit(0 if ready else 1)
