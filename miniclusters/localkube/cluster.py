"""`minicluster kube up | down | status`: the one-node cluster's life, step by step, each step shown as it runs.

`up` is idempotent (a cluster already up is reported and left alone) and starts from a clean slate otherwise:
fresh PKI and etcd, the images imported once. `down` stops everything and leaves nothing behind (teardown.py).
A lock beside the state folder keeps two `up`/`down` from interleaving.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from ipaddress import ip_address
from pathlib import Path

from common import atomic
from miniclusters import lockfile
from miniclusters.errors import MiniclustersError
from miniclusters.localkube import bootstrap, components, configs, images, pki, probes, processes, teardown
from miniclusters.localkube.layout import Layout

Say = Callable[[str], None]


class KubeError(MiniclustersError):
    """The cluster could not be brought up (or down); the message says which step and why."""


@dataclass(frozen=True)
class Step:
    component: components.Component
    ready: Callable[[Layout], bool]
    timeout: float


def _steps(layout: Layout) -> list[Step]:
    return [
        Step(components.etcd(layout), probes.etcd, 60),
        Step(components.apiserver(layout), probes.apiserver, 120),
        Step(components.controller_manager(layout), probes.controller_manager, 60),
        Step(components.scheduler(layout), probes.scheduler, 60),
        Step(components.containerd(layout), probes.containerd, 60),
        Step(components.kubelet(layout), probes.kubelet, 120),
        Step(components.kube_proxy(layout), probes.kube_proxy, 60),
        Step(components.coredns(layout), probes.dns, 60),
    ]


def missing_binaries(layout: Layout) -> list[str]:
    ours = [step.component.argv[0] for step in _steps(layout) if "/" in step.component.argv[0]]
    needed = [*ours, str(layout.binary("kubectl")), str(layout.binary("crictl"))]
    absent = [path for path in needed if not Path(path).is_file()]
    absent += [name for name in ("etcd", "containerd", "runc", "ctr", "iptables", "podman") if not shutil.which(name)]
    return absent


def is_up(layout: Layout) -> bool:
    """Every component runs and the node is Ready."""
    running = all(processes.running_pid(layout, step.component) for step in _steps(layout))
    return running and probes.node_ready(layout)


def _wait(layout: Layout, step: Step, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + step.timeout
    while time.monotonic() < deadline:
        if step.ready(layout):
            return
        if process.poll() is not None:
            tail = processes.log_tail(layout, step.component)
            raise KubeError(
                f"{step.component.name} exited ({process.returncode}) while starting; its log ends:\n{tail}"
            )
        time.sleep(0.25)
    log = layout.logs / f"{step.component.name}.log"
    raise KubeError(f"{step.component.name} was not ready after {step.timeout:.0f}s (log: {log})")


def _until(what: str, check: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.5)
    raise KubeError(f"{what}: not after {timeout:.0f}s")


def write_pki(layout: Layout) -> None:
    folder = layout.pki
    folder.mkdir(parents=True, exist_ok=True)
    ca = pki.Authority(folder, "ca", "miniclusters-kube-ca")
    node_addresses = (layout.node_address, ip_address("127.0.0.1"), layout.kubernetes_service_ip)
    domain = layout.cluster_domain
    ca.issue(
        pki.Identity(
            "apiserver",
            "kube-apiserver",
            client=False,
            server=True,
            dns_names=(
                "localhost",
                layout.node_name,
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                f"kubernetes.default.svc.{domain}",
            ),
            addresses=node_addresses,
        )
    )
    ca.issue(pki.Identity("admin", "kubernetes-admin", ("system:masters",)))
    ca.issue(pki.Identity("apiserver-kubelet-client", "kube-apiserver-kubelet-client", ("system:masters",)))
    ca.issue(pki.Identity("kube-controller-manager", "system:kube-controller-manager"))
    ca.issue(pki.Identity("kube-scheduler", "system:kube-scheduler"))
    ca.issue(pki.Identity("kube-proxy", "system:kube-proxy", ("system:node-proxier",)))
    ca.issue(pki.Identity("coredns", "system:coredns"))
    ca.issue(pki.Identity("kubelet-client", f"system:node:{layout.node_name}", ("system:nodes",)))
    ca.issue(
        pki.Identity(
            "kubelet",
            f"system:node:{layout.node_name}",
            ("system:nodes",),
            client=False,
            server=True,
            dns_names=(layout.node_name, "localhost"),
            addresses=(layout.node_address, ip_address("127.0.0.1")),
        )
    )
    front = pki.Authority(folder, "front-proxy-ca", "miniclusters-front-proxy-ca")
    front.issue(pki.Identity("front-proxy-client", "front-proxy-client"))
    pki.write_service_account_key(folder)


def write_configs(layout: Layout) -> None:
    config = layout.config
    (config / "manifests").mkdir(parents=True, exist_ok=True)
    layout.cni_config.mkdir(parents=True, exist_ok=True)
    atomic.write_text(layout.kubeconfig, configs.kubeconfig(layout, "admin"), mode=0o600)
    users = {
        "kube-controller-manager": "kube-controller-manager",
        "kube-scheduler": "kube-scheduler",
        "kube-proxy": "kube-proxy",
        "coredns": "coredns",
        "kubelet": "kubelet-client",
    }
    for component, user in users.items():
        atomic.write_text(layout.component_kubeconfig(component), configs.kubeconfig(layout, user), mode=0o600)
    atomic.write_text(config / "kubelet.yaml", configs.kubelet_config(layout))
    atomic.write_text(config / "containerd.toml", configs.containerd_config(layout))
    atomic.write_text(config / "kube-proxy.yaml", configs.kube_proxy_config(layout))
    atomic.write_text(config / "kube-scheduler.yaml", configs.scheduler_config(layout))
    atomic.write_text(config / "Corefile", configs.corefile(layout))
    atomic.write_text(layout.cni_config / "10-miniclusters.conflist", configs.cni_conflist(layout))


def prepare_host(layout: Layout) -> None:
    """What the kubelet and the CNI bridge need of the host: shared mount propagation (volumes the kubelet
    mounts must reach the containers), forwarding and bridged traffic through iptables (Services), the bridge
    up with its address before CoreDNS binds to it."""
    subprocess.run(["mount", "--make-rshared", "/"], check=False, capture_output=True)
    for key, value in (
        ("net/ipv4/ip_forward", "1"),
        ("net/bridge/bridge-nf-call-iptables", "1"),
        ("net/bridge/bridge-nf-call-ip6tables", "1"),
    ):
        path = Path("/proc/sys") / key
        if path.exists() and path.read_text().strip() != value:
            path.write_text(value)
    if not Path(f"/sys/class/net/{layout.bridge}").exists():
        subprocess.run(["ip", "link", "add", layout.bridge, "type", "bridge"], check=True, capture_output=True)
    prefix = layout.pod_network.prefixlen
    subprocess.run(
        ["ip", "addr", "replace", f"{layout.gateway}/{prefix}", "dev", layout.bridge], check=True, capture_output=True
    )
    subprocess.run(["ip", "link", "set", layout.bridge, "up"], check=True, capture_output=True)
    # /dev/kmsg: the kubelet's OOM watcher reads it; a container may lack it
    if not Path("/dev/kmsg").exists():
        Path("/dev/kmsg").symlink_to("/dev/console")


def _clear_state(layout: Layout) -> None:
    """A fresh cluster each `up`: etcd, the kubelet's pods and the PKI start empty; images stay."""
    for folder in (layout.etcd_data, layout.kubelet_root, layout.pki, layout.config, layout.state / "cni-ipam"):
        shutil.rmtree(folder, ignore_errors=True)
    layout.etcd_data.mkdir(parents=True, exist_ok=True)
    layout.etcd_data.chmod(0o700)


def up(layout: Layout, registry: str, tag: str, say: Say) -> bool:
    """Bring the cluster up; False when it already was (then only images podman rebuilt are imported again)."""
    absent = missing_binaries(layout)
    if absent:
        raise KubeError("missing: " + ", ".join(absent) + " (run `make kube` and `make images`)")
    layout.state.mkdir(parents=True, exist_ok=True)
    with lockfile.locked(layout.lock, timeout=600):
        if is_up(layout):
            # images rebuilt since (`make images`) replace what pods would start; nothing else changes
            images.import_images(layout, images.wanted_images(registry, tag), say)
            return False
        start = time.monotonic()
        _down(layout, say, quiet=True)
        _clear_state(layout)
        say("certificates and configuration")
        write_pki(layout)
        write_configs(layout)
        prepare_host(layout)
        for step in _steps(layout):
            began = time.monotonic()
            say(f"starting {step.component.name}")
            _wait(layout, step, processes.start(layout, step.component))
            say(f"{step.component.name}: ready in {time.monotonic() - began:.1f}s")
            if step.component.name == "kube-apiserver":
                bootstrap.apply(layout, bootstrap.coredns_rbac())
            if step.component.name == "containerd":
                images.import_images(layout, images.wanted_images(registry, tag), say)
            if step.component.name == "kubelet":
                _until("node Ready", lambda: probes.node_ready(layout), 120)
                say(f"node {layout.node_name}: Ready")
        _until("the default ServiceAccount", lambda: probes.default_service_account(layout), 60)
        atomic.write_text(layout.state / "up-seconds", f"{time.monotonic() - start:.2f}\n")
        return True


def _down(layout: Layout, say: Say, quiet: bool = False) -> None:
    steps = _steps(layout)
    by_name = {step.component.name: step.component for step in steps}
    if processes.running_pid(layout, by_name["containerd"]):
        if processes.running_pid(layout, by_name["kubelet"]):
            processes.stop(layout, by_name["kubelet"])
        teardown.remove_pods(layout, say)
        teardown.remove_leftover_containers(layout)
    for step in reversed(steps):
        if processes.stop(layout, step.component) and not quiet:
            say(f"stopped {step.component.name}")
    teardown.remove_netns()
    stuck = teardown.unmount_all(layout)
    teardown.remove_bridge(layout)
    teardown.clean_iptables(layout)
    teardown.remove_cgroups()
    if stuck:
        raise KubeError("could not unmount: " + ", ".join(stuck))


def down(layout: Layout, say: Say) -> None:
    """Stop everything, then look: a process, mount, interface, network namespace or iptables rule of ours
    still there is an error naming each (containers went with containerd's pods, through the CRI)."""
    layout.state.mkdir(parents=True, exist_ok=True)
    with lockfile.locked(layout.lock, timeout=600):
        _down(layout, say)
        running = [s.component.name for s in _steps(layout) if processes.running_pid(layout, s.component)]
        left = teardown.leftovers(layout, running)
        if left:
            raise KubeError("down left: " + "; ".join(left))
        shutil.rmtree(layout.etcd_data, ignore_errors=True)
        shutil.rmtree(layout.kubelet_root, ignore_errors=True)
        shutil.rmtree(layout.run, ignore_errors=True)
        layout.kubeconfig.unlink(missing_ok=True)


@dataclass(frozen=True)
class ComponentStatus:
    name: str
    pid: int | None


def status(layout: Layout) -> tuple[list[ComponentStatus], bool]:
    """Each component's pid (None when not running), and whether the node is Ready."""
    listed = [ComponentStatus(s.component.name, processes.running_pid(layout, s.component)) for s in _steps(layout)]
    ready = any(item.pid for item in listed) and probes.node_ready(layout)
    return listed, bool(ready)
