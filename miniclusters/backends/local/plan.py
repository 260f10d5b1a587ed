"""Pure planning for local clusters: names, addresses, and CPU request -> kernel weight (as the kubelet maps it).

Nothing here touches the system, so every rule is tested without root.
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Iterable
from dataclasses import dataclass

# cgroup v1 cpu.shares bounds and the kubelet's milliCPU -> shares scale (pkg/kubelet/cm, MilliCPUToShares).
MIN_SHARES = 2
MAX_SHARES = 262144
SHARES_PER_CPU = 1024
MILLI_PER_CPU = 1000
MIN_WEIGHT = 1
MAX_WEIGHT = 10000

# Private pool the per-cluster /24s come from (netns mode), and the loopback block of unprivileged mode.
SUBNET_POOL = ipaddress.IPv4Network("10.213.0.0/16")
LOOPBACK_PREFIX = "127.213"
FIRST_POD_HOST = 2
"""Pod i gets host address i+2 of its /24: .1 is the bridge (the gateway), .0 the network."""
MAX_LOCAL_PODS = 250

# Linux CFS: each nice step changes a task's weight by about 1.25x; nice 0 has weight 1024 (one CPU's worth).
NICE_STEP = 1.25
NICE_MIN = -20
NICE_MAX = 19


def pod_name(name: str, index: int) -> str:
    """The pod's hostname, as Kubernetes names Indexed Job pods with a subdomain."""
    return f"{name}-{index}"


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

    def hosts_file(self, name: str, max_size: int) -> str:
        """/etc/hosts for every pod: every pre-registered pod name resolves, including those not started yet."""
        lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback"]
        lines += [f"{self.pod_address(i)}\t{pod_name(name, i)}" for i in range(max_size)]
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


# ---------------------------------------------------------------------------------------- CPU weights
def milli_to_shares(milli: int) -> int:
    """cgroup v1 cpu.shares for a CPU request, as the kubelet computes it (no request -> the minimum, 2)."""
    if milli <= 0:
        return MIN_SHARES
    return max(MIN_SHARES, min(MAX_SHARES, milli * SHARES_PER_CPU // MILLI_PER_CPU))


def shares_to_milli(shares: int) -> int:
    """The request a cpu.shares value stands for (the kubelet's sharesToMilliCPU: rounded up)."""
    if shares <= MIN_SHARES:
        return 0
    return math.ceil(shares * MILLI_PER_CPU / SHARES_PER_CPU)


def shares_to_weight_linear(shares: int) -> int:
    """cgroup v2 cpu.weight by the old linear conversion (runc < 1.3.2, crun < 1.23)."""
    shares = max(MIN_SHARES, min(MAX_SHARES, shares))
    return 1 + ((shares - 2) * 9999) // 262142


def shares_to_weight_nonlinear(shares: int) -> int:
    """cgroup v2 cpu.weight by the runtimes' current formula (runc >= 1.3.2, crun >= 1.23).

    It maps 1024 shares (one CPU) to weight 100, the cgroup v2 default, which the linear formula does not.
    """
    shares = max(MIN_SHARES, min(MAX_SHARES, shares))
    if shares == MAX_SHARES:
        return MAX_WEIGHT
    exponent = math.log2(shares)
    weight = math.ceil(10 ** ((exponent * exponent + 125 * exponent) / 612.0 - 7.0 / 34.0))
    return max(MIN_WEIGHT, min(MAX_WEIGHT, weight))


def milli_to_weight(milli: int, formula: str = "nonlinear") -> int:
    shares = milli_to_shares(milli)
    if formula == "linear":
        return shares_to_weight_linear(shares)
    if formula == "nonlinear":
        return shares_to_weight_nonlinear(shares)
    raise ValueError(f"unknown cgroup v2 weight formula {formula!r} (linear or nonlinear)")


def weight_to_milli(weight: int, formula: str = "nonlinear", hint: int | None = None) -> int:
    """The request a cpu.weight stands for: `hint` when it maps to this weight, else the smallest that does.

    The mapping is many-to-one, so reading a weight back cannot always recover the exact request; the hint
    (the desired request) tells "applied" from "something else".
    """
    if hint is not None and milli_to_weight(hint, formula) == weight:
        return hint
    convert = shares_to_weight_linear if formula == "linear" else shares_to_weight_nonlinear
    low, high = MIN_SHARES, MAX_SHARES
    while low < high:  # smallest shares with convert(shares) >= weight (both formulas are monotone)
        middle = (low + high) // 2
        if convert(middle) >= weight:
            high = middle
        else:
            low = middle + 1
    return shares_to_milli(low)


def milli_to_nice(milli: int) -> int:
    """A nice level whose CFS weight approximates the request's shares relative to one CPU (nice 0)."""
    shares = milli_to_shares(milli)
    nice = round(math.log(SHARES_PER_CPU / shares) / math.log(NICE_STEP))
    return max(NICE_MIN, min(NICE_MAX, nice))


def nice_to_milli(nice: int) -> int:
    """The request a nice level approximates (inverse of milli_to_nice, to the nearest step)."""
    return max(0, round(MILLI_PER_CPU * NICE_STEP ** (-nice)))


def limit_to_quota(milli: int, period_us: int = 100_000) -> int:
    """CFS quota in microseconds per period for a CPU limit (the kubelet's MilliCPUToQuota, min 1 ms)."""
    return max(1000, milli * period_us // MILLI_PER_CPU)
