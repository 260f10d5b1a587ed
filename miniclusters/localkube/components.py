"""The cluster's processes, in the order they start: each one's command line, rendered from the layout (pure).

Every component authenticates with its own certificate; the apiserver admits with its defaults plus the
in-place resize of pods (GA in this release: no feature gate needed) and aggregates extension API servers with
the front-proxy CA (the custom metrics API of the operator's issue).
"""

from __future__ import annotations

from dataclasses import dataclass

from miniclusters.localkube.layout import Layout


@dataclass(frozen=True)
class Component:
    name: str
    argv: tuple[str, ...]


def etcd(layout: Layout) -> Component:
    return Component(
        "etcd",
        (
            "etcd",
            "--name=miniclusters",
            f"--data-dir={layout.etcd_data}",
            f"--listen-client-urls={layout.etcd_url}",
            f"--advertise-client-urls={layout.etcd_url}",
            f"--listen-peer-urls=http://127.0.0.1:{layout.etcd_peer_port}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{layout.etcd_peer_port}",
            f"--initial-cluster=miniclusters=http://127.0.0.1:{layout.etcd_peer_port}",
            "--initial-cluster-state=new",
            "--quota-backend-bytes=2147483648",
            "--snapshot-count=10000",
            "--logger=zap",
            "--log-level=warn",
        ),
    )


def apiserver(layout: Layout) -> Component:
    pki = layout.pki
    return Component(
        "kube-apiserver",
        (
            str(layout.binary("kube-apiserver")),
            f"--advertise-address={layout.node_address}",
            "--bind-address=0.0.0.0",
            f"--secure-port={layout.apiserver_port}",
            f"--etcd-servers={layout.etcd_url}",
            f"--service-cluster-ip-range={layout.service_network}",
            "--service-node-port-range=30000-32767",
            "--allow-privileged=true",
            "--authorization-mode=Node,RBAC",
            "--enable-admission-plugins=NodeRestriction",
            f"--client-ca-file={pki / 'ca.crt'}",
            f"--tls-cert-file={pki / 'apiserver.crt'}",
            f"--tls-private-key-file={pki / 'apiserver.key'}",
            f"--kubelet-client-certificate={pki / 'apiserver-kubelet-client.crt'}",
            f"--kubelet-client-key={pki / 'apiserver-kubelet-client.key'}",
            f"--kubelet-certificate-authority={pki / 'ca.crt'}",
            "--kubelet-preferred-address-types=InternalIP,Hostname",
            f"--service-account-issuer=https://kubernetes.default.svc.{layout.cluster_domain}",
            f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            f"--requestheader-client-ca-file={pki / 'front-proxy-ca.crt'}",
            "--requestheader-allowed-names=front-proxy-client",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-username-headers=X-Remote-User",
            f"--proxy-client-cert-file={pki / 'front-proxy-client.crt'}",
            f"--proxy-client-key-file={pki / 'front-proxy-client.key'}",
            "--enable-aggregator-routing=true",
            "--event-ttl=1h",
            "--v=1",
        ),
    )


def controller_manager(layout: Layout) -> Component:
    pki = layout.pki
    kubeconfig = layout.component_kubeconfig("kube-controller-manager")
    return Component(
        "kube-controller-manager",
        (
            str(layout.binary("kube-controller-manager")),
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1",
            "--leader-elect=false",
            "--use-service-account-credentials=true",
            f"--service-account-private-key-file={pki / 'sa.key'}",
            f"--root-ca-file={pki / 'ca.crt'}",
            f"--cluster-signing-cert-file={pki / 'ca.crt'}",
            f"--cluster-signing-key-file={pki / 'ca.key'}",
            f"--requestheader-client-ca-file={pki / 'front-proxy-ca.crt'}",
            f"--service-cluster-ip-range={layout.service_network}",
            "--controllers=*",
            "--horizontal-pod-autoscaler-sync-period=5s",
            "--v=1",
        ),
    )


def scheduler(layout: Layout) -> Component:
    kubeconfig = layout.component_kubeconfig("kube-scheduler")
    return Component(
        "kube-scheduler",
        (
            str(layout.binary("kube-scheduler")),
            f"--config={layout.config / 'kube-scheduler.yaml'}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1",
            "--v=1",
        ),
    )


def containerd(layout: Layout) -> Component:
    return Component("containerd", ("containerd", f"--config={layout.config / 'containerd.toml'}"))


def kubelet(layout: Layout) -> Component:
    return Component(
        "kubelet",
        (
            str(layout.binary("kubelet")),
            f"--config={layout.config / 'kubelet.yaml'}",
            f"--kubeconfig={layout.component_kubeconfig('kubelet')}",
            f"--root-dir={layout.kubelet_root}",
            f"--hostname-override={layout.node_name}",
            f"--node-ip={layout.node_address}",
            "--v=1",
        ),
    )


def kube_proxy(layout: Layout) -> Component:
    return Component(
        "kube-proxy",
        (str(layout.binary("kube-proxy")), f"--config={layout.config / 'kube-proxy.yaml'}", "--v=1"),
    )


def coredns(layout: Layout) -> Component:
    return Component("coredns", (str(layout.binary("coredns")), "-conf", str(layout.config / "Corefile")))


def all_components(layout: Layout) -> tuple[Component, ...]:
    """In start order; `down` stops them in the reverse order."""
    return (
        etcd(layout),
        apiserver(layout),
        controller_manager(layout),
        scheduler(layout),
        containerd(layout),
        kubelet(layout),
        kube_proxy(layout),
        coredns(layout),
    )
