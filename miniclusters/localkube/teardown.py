"""What `down` must leave: no process, mount, network interface, iptables rule or container of the cluster.

Pods go first, through the CRI while containerd still runs (crictl: each sandbox's CNI DEL frees its veth and
address); then the processes; then whatever a crash could have left: mounts under the cluster's folders and the
network namespaces containerd made, the bridge, the iptables chains the kubelet, kube-proxy and the CNI plugins
added (found by name and by our bridge's subnet), and the kubelet's cgroups.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Callable, Iterable
from pathlib import Path

from miniclusters.localkube.layout import Layout

_NETNS = Path("/var/run/netns")
_CGROUP_ROOT = Path("/sys/fs/cgroup")


def _run(argv: list[str], timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)


def remove_pods(layout: Layout, say: Callable[[str], None]) -> int:
    """Stop and remove every pod sandbox (and so its containers) through the CRI; returns how many there were."""
    crictl = [str(layout.binary("crictl")), "--runtime-endpoint", f"unix://{layout.containerd_socket}", "-t", "30s"]
    listed = _run([*crictl, "pods", "-q"])
    pods = listed.stdout.split() if listed.returncode == 0 else []
    if pods:
        say(f"removing {len(pods)} pod sandbox(es)")
        _run([*crictl, "stopp", *pods], timeout=120)
        _run([*crictl, "rmp", "--force", *pods], timeout=120)
    return len(pods)


def remove_leftover_containers(layout: Layout) -> None:
    """Anything the CRI did not remove (containerd still running): kill its task, delete it."""
    ctr = ["ctr", "--address", str(layout.containerd_socket), "-n", "k8s.io"]
    for task in _run([*ctr, "tasks", "ls", "-q"]).stdout.split():
        _run([*ctr, "tasks", "kill", "-s", "SIGKILL", task])
        _run([*ctr, "tasks", "delete", "-f", task])
    for container in _run([*ctr, "containers", "ls", "-q"]).stdout.split():
        _run([*ctr, "containers", "delete", container])


def our_mounts(layout: Layout, mounts_text: str) -> list[str]:
    """Mount points under the cluster's folders (or containerd's netns of ours), deepest first."""
    roots = tuple(str(path) for path in (layout.state, layout.run))
    points = []
    for line in mounts_text.splitlines():
        fields = line.split()
        if len(fields) < 2:
            continue
        point = fields[1].replace("\\040", " ")
        if point.startswith(roots) or (point.startswith(str(_NETNS) + "/cni-")):
            points.append(point)
    return sorted(set(points), key=lambda point: point.count("/"), reverse=True)


def unmount_all(layout: Layout) -> list[str]:
    """Unmount every mount of ours; returns those that would not go (should be none)."""
    stuck: list[str] = []
    for _attempt in range(3):
        points = our_mounts(layout, Path("/proc/self/mounts").read_text())
        if not points:
            return []
        stuck = [point for point in points if _run(["umount", point]).returncode != 0]
        for point in stuck:
            _run(["umount", "-l", point])
    return our_mounts(layout, Path("/proc/self/mounts").read_text())


def remove_netns() -> None:
    if not _NETNS.is_dir():
        return
    for entry in _NETNS.glob("cni-*"):
        _run(["umount", str(entry)])
        entry.unlink(missing_ok=True)


def remove_bridge(layout: Layout) -> None:
    if Path(f"/sys/class/net/{layout.bridge}").exists():
        _run(["ip", "link", "delete", layout.bridge])


def _names_ours(layout: Layout, rule: str) -> bool:
    return str(layout.pod_network) in rule or layout.bridge in rule or 'name: \\"miniclusters\\"' in rule


def rules_to_delete(layout: Layout, saved: str) -> tuple[list[str], list[str]]:
    """From `iptables-save` of one table: the rules to delete (as -D argument strings) in chains that are not
    ours but jump to ours or name our pod network, and our chains to flush and delete. Ours: every KUBE-*
    chain (the kubelet's and kube-proxy's) and the CNI-* chains our bridge's rules jump to (podman's CNI
    networks have CNI-* chains of their own, which stay)."""
    ours: list[str] = []
    rules: list[str] = []
    for line in saved.splitlines():
        if line.startswith(":"):
            chain = line[1:].split()[0]
            if chain.startswith("KUBE-"):
                ours.append(chain)
        elif line.startswith("-A "):
            rules.append(line)
    for line in rules:
        words = line.split()
        target = words[words.index("-j") + 1] if "-j" in words[:-1] else ""
        if target.startswith("CNI-") and _names_ours(layout, line) and target not in ours:
            ours.append(target)
    deletes = []
    for line in rules:
        words = line.split()
        chain = words[1]
        if chain in ours:
            continue
        target = words[words.index("-j") + 1] if "-j" in words[:-1] else ""
        if target in ours or _names_ours(layout, line):
            deletes.append("-D " + line[3:])
    return deletes, ours


def clean_iptables(layout: Layout) -> None:
    for table in ("filter", "nat", "mangle", "raw"):
        saved = _run(["iptables-save", "-t", table])
        if saved.returncode != 0:
            continue
        deletes, chains = rules_to_delete(layout, saved.stdout)
        for rule in deletes:
            _run(["sh", "-c", f"iptables -t {table} {rule}"])
        for chain in chains:
            _run(["iptables", "-t", table, "-F", chain])
        for chain in chains:
            _run(["iptables", "-t", table, "-X", chain])


def _depth_first(root: Path) -> Iterable[Path]:
    for dirpath, _dirnames, _files in os.walk(root, topdown=False):
        yield Path(dirpath)


def remove_cgroups() -> None:
    """The kubelet's `kubepods` hierarchy in every v1 controller (empty once its processes are gone)."""
    if not _CGROUP_ROOT.is_dir():
        return
    for controller in _CGROUP_ROOT.iterdir():
        top = controller / "kubepods"
        if top.is_dir():
            for folder in _depth_first(top):
                with contextlib.suppress(OSError):
                    folder.rmdir()


def leftovers(layout: Layout, running: list[str]) -> list[str]:
    """What `down` must not leave, still there: `running` names components whose process lives on."""
    found = [f"process {name}" for name in running]
    found += [f"mount {point}" for point in our_mounts(layout, Path("/proc/self/mounts").read_text())]
    if Path(f"/sys/class/net/{layout.bridge}").exists():
        found.append(f"interface {layout.bridge}")
    if _NETNS.is_dir():
        found += [f"network namespace {entry.name}" for entry in _NETNS.glob("cni-*")]
    for table in ("filter", "nat", "mangle", "raw"):
        saved = _run(["iptables-save", "-t", table])
        if saved.returncode == 0:
            deletes, chains = rules_to_delete(layout, saved.stdout)
            found += [f"iptables -t {table} chain {chain}" for chain in chains]
            found += [f"iptables -t {table} rule {rule[3:]}" for rule in deletes]
    return found
