"""`minicluster kube down` finds exactly what is ours: mounts under our folders, our chains, not podman's."""

from __future__ import annotations

from ipaddress import IPv4Address
from pathlib import Path

from miniclusters.localkube import teardown
from miniclusters.localkube.layout import Layout

LAYOUT = Layout(
    cache=Path("/c"),
    state=Path("/var/lib/mc/kube"),
    run=Path("/run/mck"),
    node_name="n",
    node_address=IPv4Address("192.0.2.1"),
)

MOUNTS = """\
/dev/vda / ext4 rw 0 0
shm /run/mck/containerd/state/io.containerd.grpc.v1.cri/sandboxes/abc/shm tmpfs rw 0 0
overlay /run/mck/containerd/state/io.containerd.runtime.v2.task/k8s.io/abc/rootfs overlay rw 0 0
tmpfs /var/lib/mc/kube/kubelet/pods/uid/volumes/kubernetes.io~projected/kube-api-access tmpfs rw 0 0
nsfs /var/run/netns/cni-1234 nsfs rw 0 0
nsfs /var/run/netns/podman-net nsfs rw 0 0
overlay /var/lib/containers/storage/overlay/x/merged overlay rw 0 0
"""


def test_only_our_mounts_deepest_first() -> None:
    points = teardown.our_mounts(LAYOUT, MOUNTS)
    assert "/" not in points
    assert "/var/lib/containers/storage/overlay/x/merged" not in points  # podman's
    assert "/var/run/netns/podman-net" not in points
    assert "/var/run/netns/cni-1234" in points
    assert len(points) == 4
    depths = [point.count("/") for point in points]
    assert depths == sorted(depths, reverse=True)


NAT = """\
*nat
:PREROUTING ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:KUBE-SERVICES - [0:0]
:KUBE-POSTROUTING - [0:0]
:CNI-aaaa - [0:0]
:CNI-bbbb - [0:0]
:CNI-HOSTPORT-DNAT - [0:0]
-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING
-A POSTROUTING -s 10.244.0.5/32 -m comment --comment "name: \\"miniclusters\\" id: \\"x\\"" -j CNI-aaaa
-A POSTROUTING -s 10.88.0.7/32 -m comment --comment "name: \\"podman\\" id: \\"y\\"" -j CNI-bbbb
-A PREROUTING -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT
-A CNI-aaaa -d 10.244.0.0/24 -j ACCEPT
-A CNI-bbbb -d 10.88.0.0/16 -j ACCEPT
COMMIT
"""


def test_our_chains_go_and_podmans_stay() -> None:
    deletes, chains = teardown.rules_to_delete(LAYOUT, NAT)
    assert set(chains) == {"KUBE-SERVICES", "KUBE-POSTROUTING", "CNI-aaaa"}
    assert len(deletes) == 3
    assert all(rule.startswith("-D PREROUTING") or rule.startswith("-D POSTROUTING") for rule in deletes)
    assert not any("CNI-bbbb" in rule or "CNI-HOSTPORT" in rule for rule in deletes)
