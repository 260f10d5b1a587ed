"""Where the one-node cluster keeps its binaries, state and sockets, and the addresses it uses.

One value object passed to every part, so a test can lay a cluster out in a temporary folder and every path in
the rendered configuration follows. The defaults put state outside any checkout (like flux-core's build), the
binaries in `make kube`'s cache, and the networks clear of podman's default (10.88.0.0/16).
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from ipaddress import IPv4Address, IPv4Network
from pathlib import Path

KUBE_VERSION = "v1.37.2"
"""The pinned release (Makefile's KUBE_VERSION names the same; a test holds them equal)."""

DEFAULT_CACHE = Path(os.environ.get("MINICLUSTERS_KUBE_CACHE", "/var/cache/miniclusters/kube"))
DEFAULT_STATE = Path(os.environ.get("MINICLUSTERS_KUBE_STATE", "/var/lib/miniclusters/kube"))
DEFAULT_RUN = Path(os.environ.get("MINICLUSTERS_KUBE_RUN", "/run/miniclusters-kube"))


def _node_address() -> IPv4Address:
    """The address this machine reaches others from (its default route's source), else loopback."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # TEST-NET-1: nothing is sent, the kernel only picks a route
            return IPv4Address(probe.getsockname()[0])
        except OSError:
            return IPv4Address("127.0.0.1")


@dataclass(frozen=True)
class Layout:
    """Every path and address of one cluster."""

    cache: Path = DEFAULT_CACHE
    state: Path = DEFAULT_STATE
    run: Path = DEFAULT_RUN
    version: str = KUBE_VERSION
    node_name: str = field(default_factory=lambda: socket.gethostname().lower().split(".")[0] or "node")
    node_address: IPv4Address = field(default_factory=_node_address)
    pod_network: IPv4Network = field(default_factory=lambda: IPv4Network("10.244.0.0/24"))
    service_network: IPv4Network = field(default_factory=lambda: IPv4Network("10.96.0.0/16"))
    bridge: str = "mckube0"
    apiserver_port: int = 6443
    etcd_client_port: int = 23790
    etcd_peer_port: int = 23800
    cluster_domain: str = "cluster.local"

    # --- binaries (make kube) -------------------------------------------------------------------------------
    @property
    def bin(self) -> Path:
        return self.cache / self.version / "bin"

    def binary(self, name: str) -> Path:
        return self.bin / name

    @property
    def stamp(self) -> Path:
        """Written by `make kube` only after every binary built."""
        return self.cache / self.version / ".miniclusters-installed"

    # --- state ------------------------------------------------------------------------------------------------
    @property
    def pki(self) -> Path:
        return self.state / "pki"

    @property
    def etcd_data(self) -> Path:
        return self.state / "etcd"

    @property
    def kubelet_root(self) -> Path:
        return self.state / "kubelet"

    @property
    def containerd_root(self) -> Path:
        return self.state / "containerd"

    @property
    def logs(self) -> Path:
        return self.state / "logs"

    @property
    def config(self) -> Path:
        return self.state / "config"

    @property
    def cni_config(self) -> Path:
        return self.state / "cni"

    @property
    def kubeconfig(self) -> Path:
        """The administrator's kubeconfig, printed by `up`."""
        return self.state / "admin.kubeconfig"

    def component_kubeconfig(self, component: str) -> Path:
        return self.config / f"{component}.kubeconfig"

    @property
    def lock(self) -> Path:
        return self.state.parent / f"{self.state.name}.lock"

    # --- run time ---------------------------------------------------------------------------------------------
    @property
    def containerd_socket(self) -> Path:
        return self.run / "containerd" / "containerd.sock"

    @property
    def containerd_state(self) -> Path:
        return self.run / "containerd" / "state"

    @property
    def pids(self) -> Path:
        return self.run / "pids"

    # --- addresses --------------------------------------------------------------------------------------------
    @property
    def apiserver_url(self) -> str:
        return f"https://{self.node_address}:{self.apiserver_port}"

    @property
    def etcd_url(self) -> str:
        return f"http://127.0.0.1:{self.etcd_client_port}"

    @property
    def gateway(self) -> IPv4Address:
        """The bridge's address: the pods' default route, and where CoreDNS answers them."""
        return next(self.pod_network.hosts())

    @property
    def kubernetes_service_ip(self) -> IPv4Address:
        return next(self.service_network.hosts())

    @property
    def dns_address(self) -> IPv4Address:
        return self.gateway
