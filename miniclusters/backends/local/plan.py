"""Pure planning for local clusters: names and addresses (the CPU request -> kernel weight mapping is
elasticity/model/cpu.py, shared with the CPU allocation policy).

Nothing here touches the system, so every rule is tested without root.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

from miniclusters.api.hosts import HostRegistry

# Private pool the per-cluster /24s come from (netns mode), and the loopback block of unprivileged mode.
SUBNET_POOL = ipaddress.IPv4Network("10.213.0.0/16")
LOOPBACK_PREFIX = "127.213"
FIRST_POD_HOST = 2
"""Pod i gets host address i+2 of its /24: .1 is the bridge (the gateway), .0 the network."""
MAX_LOCAL_PODS = 250


@dataclass(frozen=True)
class Addressing:
    """Where one cluster's pods live: a /24 (netns mode, bridge at .1) or a loopback /24 (unprivileged)."""

    network: ipaddress.IPv4Network
    slot: int
    """Third octet: unique among the clusters on this machine; also names the bridge and veths."""

    @property
    def gateway(self) -> ipaddress.IPv4Address:
        return self.network.network_address + 1

    def pod_address(self, index: int) -> ipaddress.IPv4Address:
        if not 0 <= index < MAX_LOCAL_PODS:
            raise ValueError(f"pod index {index} is outside 0..{MAX_LOCAL_PODS - 1}")
        return self.network.network_address + FIRST_POD_HOST + index

    def hosts_file(self, registry: HostRegistry) -> str:
        """/etc/hosts for every pod: every pre-registered pod name resolves, including those not started yet."""
        lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback"]
        lines += [f"{self.pod_address(i)}\t{host}" for i, host in enumerate(registry.pod_hostnames())]
        return "\n".join(lines) + "\n"


def choose_slot(taken: Iterable[int], in_use: Iterable[ipaddress.IPv4Network], loopback: bool = False) -> Addressing:
    """The first free /24 of the pool: not used by another local cluster, not overlapping a route or address."""
    busy = set(taken)
    routes = list(in_use)
    for slot in range(1, 255):
        if slot in busy:
            continue
        network = (
            ipaddress.IPv4Network(f"{LOOPBACK_PREFIX}.{slot}.0/24")
            if loopback
            else ipaddress.IPv4Network(f"{SUBNET_POOL.network_address + slot * 256}/24")
        )
        if not loopback and any(network.overlaps(route) for route in routes):
            continue
        return Addressing(network, slot)
    pool = f"{LOOPBACK_PREFIX}.0.0/16" if loopback else str(SUBNET_POOL)
    raise RuntimeError(f"no free /24 left in {pool} (taken by other local MiniClusters or existing routes)")


def addressing_for(slot: int, loopback: bool) -> Addressing:
    """The Addressing a recorded slot stands for."""
    prefix = f"{LOOPBACK_PREFIX}.{slot}.0/24" if loopback else f"{SUBNET_POOL.network_address + slot * 256}/24"
    return Addressing(ipaddress.IPv4Network(prefix), slot)


def netns_name(name: str, index: int) -> str:
    return f"mc-{name}-{index}"


def bridge_name(slot: int) -> str:
    return f"mcbr{slot}"


def veth_name(slot: int, index: int) -> str:
    """Host side of pod `index`'s veth pair (at most 15 characters, the kernel's limit)."""
    return f"mcv{slot}x{index}"
