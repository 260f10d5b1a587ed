"""Pod networking as root: a network namespace per pod, a veth pair into a per-cluster bridge, host entries.

The pod's end of the veth is named eth0, so the rendered `default_bind = "tcp://eth0:%p"` binds to the pod's own
address, and /etc/netns/<ns>/hosts (bind-mounted over /etc/hosts by `ip netns exec`) lets every pod resolve every
pre-registered pod name, the way the headless Service's DNS does in Kubernetes.
"""

from __future__ import annotations

import contextlib
import ipaddress
import shutil
import subprocess
from pathlib import Path

from miniclusters.backends.local import latency, plan
from miniclusters.errors import MiniclustersError

NETNS_ETC = Path("/etc/netns")


class NetworkError(MiniclustersError, RuntimeError):
    """An `ip`/`tc` command failed; the message carries its stderr."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and result.returncode != 0:
        raise NetworkError(f"`ip {' '.join(args)}` failed: {result.stderr.strip() or result.returncode}")
    return result


def available() -> bool:
    return shutil.which("ip") is not None


def routes_in_use() -> list[ipaddress.IPv4Network]:
    """Every IPv4 network routed or assigned on this machine (so a new cluster's /24 collides with none)."""
    networks: list[ipaddress.IPv4Network] = []
    for args in (("-4", "route", "show", "table", "all"), ("-4", "-o", "addr", "show")):
        result = _ip(*args, check=False)
        for line in result.stdout.splitlines():
            words = line.split()
            candidates = words[:1] if args[1] == "route" else words[3:4]
            for word in candidates:
                if word in ("default", "broadcast", "local", "unreachable"):
                    continue
                try:
                    networks.append(ipaddress.IPv4Network(word, strict=False))
                except ValueError:
                    continue
    return [n for n in networks if n.prefixlen > 0]


def list_namespaces() -> set[str]:
    result = _ip("netns", "list", check=False)
    return {line.split()[0] for line in result.stdout.splitlines() if line.strip()}


def namespace_in_use(name: str) -> bool:
    """True while any process runs inside the namespace (a live pod); an empty one is a crashed run's leftover."""
    result = _ip("netns", "pids", name, check=False)
    return result.returncode != 0 or bool(result.stdout.strip())


def delete_namespace(name: str) -> None:
    """Remove a namespace and its /etc/netns entries; its veth end goes with it, which takes the host end too."""
    latency.stop_delay_lines(name)
    _ip("netns", "del", name, check=False)
    shutil.rmtree(NETNS_ETC / name, ignore_errors=True)


def link_exists(name: str) -> bool:
    return _ip("link", "show", "dev", name, check=False).returncode == 0


def ensure_bridge(addressing: plan.Addressing) -> str:
    """The cluster's bridge in the root namespace, holding the gateway address, up."""
    bridge = plan.bridge_name(addressing.slot)
    if not link_exists(bridge):
        _ip("link", "add", bridge, "type", "bridge")
        _ip("addr", "add", f"{addressing.gateway}/{addressing.network.prefixlen}", "dev", bridge)
    _ip("link", "set", bridge, "up")
    return bridge


def enable_forwarding() -> None:
    """Route between the clusters' bridges (a burst's pods and the lead's live on different /24s)."""
    path = Path("/proc/sys/net/ipv4/ip_forward")
    if path.read_text().strip() != "1":
        path.write_text("1\n")


def delete_bridge(slot: int) -> None:
    bridge = plan.bridge_name(slot)
    if link_exists(bridge):
        _ip("link", "del", bridge, check=False)


def write_hosts(namespace: str, hosts_text: str, hostname: str) -> None:
    directory = NETNS_ETC / namespace
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "hosts").write_text(hosts_text)
    (directory / "hostname").write_text(hostname + "\n")
    # Pods have no route to a DNS server: without this, AAAA lookups of pod names (getaddrinfo, `getent hosts`)
    # would wait for the host's nameservers to time out. No nameserver line means 127.0.0.1, refused at once.
    (directory / "resolv.conf").write_text(
        "# local MiniCluster pod: names resolve through /etc/hosts only\noptions timeout:1 attempts:1\n"
    )


def create_pod_network(addressing: plan.Addressing, namespace: str, index: int, hosts_text: str, hostname: str) -> str:
    """Namespace, veth pair (host end on the bridge, pod end eth0 with the pod's address), lo up, default route."""
    bridge = ensure_bridge(addressing)
    delete_pod_network(namespace, addressing.slot, index)  # leftovers of a crashed run with this name
    host_end = plan.veth_name(addressing.slot, index)
    peer = f"{host_end}p"
    address = addressing.pod_address(index)
    write_hosts(namespace, hosts_text, hostname)
    _ip("netns", "add", namespace)
    try:
        _ip("link", "add", host_end, "type", "veth", "peer", "name", peer)
        _ip("link", "set", peer, "netns", namespace)
        _ip("link", "set", host_end, "master", bridge)
        _ip("link", "set", host_end, "up")
        _ip("-n", namespace, "link", "set", peer, "name", "eth0")
        _ip("-n", namespace, "addr", "add", f"{address}/{addressing.network.prefixlen}", "dev", "eth0")
        _ip("-n", namespace, "link", "set", "eth0", "up")
        _ip("-n", namespace, "link", "set", "lo", "up")
        _ip("-n", namespace, "route", "add", "default", "via", str(addressing.gateway))
    except NetworkError:
        delete_pod_network(namespace, addressing.slot, index)
        raise
    return str(address)


def delete_pod_network(namespace: str, slot: int, index: int) -> None:
    """Remove the namespace (which takes its veth end with it), the host end, and the host entries."""
    if namespace in list_namespaces():
        latency.stop_delay_lines(namespace)  # a process inside would keep the namespace alive
        _ip("netns", "del", namespace, check=False)
    host_end = plan.veth_name(slot, index)
    if link_exists(host_end):
        _ip("link", "del", host_end, check=False)
    shutil.rmtree(NETNS_ETC / namespace, ignore_errors=True)
    with contextlib.suppress(OSError):  # /etc/netns itself, once no namespace has files there
        NETNS_ETC.rmdir()
