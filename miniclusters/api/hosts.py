"""The one host registry: which hosts are broker ranks.

Rank i is the i-th registered host. A MiniCluster pre-registers its pods `<name>-0 .. <name>-(maxSize-1)` (so pods
added by a scale-up join as ranks that already exist), then the hosts of the Flux Operator's bursted clusters
(`spec.flux.bursting.clusters`: `<cluster>-0 .. <cluster>-(size-1)` each, in order, as the operator's
generateHostlist appends them), or, with `spec.flux.bursting.hostlist`, exactly the hosts that list names. Hosts
that are not pre-registered (our burst service's bursts) are appended with `with_hosts`, after every pod, so no
existing rank ever moves. Render (the broker config, host entries, the entrypoint), the spec rules
(hostname length) and the backends (addresses, /etc/hosts, the scaling ceiling) all ask this registry.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import hostlist

from miniclusters.api.spec import MiniCluster


def pod_hostname(cluster: str, index: int) -> str:
    """The hostname of pod `index`, as Kubernetes names Indexed Job pods with a subdomain."""
    return f"{cluster}-{index}"


def range_hostlist(prefix: str, count: int) -> str:
    """`prefix-0 .. prefix-(count-1)` in hostlist syntax: `prefix-0` or `prefix-[0-N]`."""
    return f"{prefix}-0" if count == 1 else f"{prefix}-[0-{count - 1}]"


def bursted_clusters(mc: MiniCluster) -> tuple[tuple[str, int], ...]:
    """spec.flux.bursting.clusters with the operator's documented defaults: name `burst-<index>`, size spec.size."""
    return tuple(
        (cluster.name or f"burst-{index}", cluster.size or mc.spec.size)
        for index, cluster in enumerate(mc.spec.flux.bursting.clusters)
    )


@dataclass(frozen=True)
class HostRegistry:
    """Registered hosts in rank order (see the module docstring)."""

    cluster: str
    pods: int
    """Pods pre-registered (ranks 0..pods-1 are `<cluster>-<i>`): the ceiling of scaling."""
    custom: str = ""
    """A hostlist replacing the pods' names (spec.flux.bursting.hostlist)."""
    extra: tuple[str, ...] = ()
    """Hosts registered later (not pre-registered), ranks after every pod."""
    bursted: tuple[tuple[str, int], ...] = ()
    """The Flux Operator's bursted clusters (name, size): their hosts follow the pods (never with `custom`)."""

    def hostnames(self) -> list[str]:
        """Every registered host, rank order."""
        base = hostlist.expand_hostlist(self.custom) if self.custom else self.pod_hostnames()
        return [*base, *self.bursted_hostnames(), *self.extra]

    def pod_hostnames(self) -> list[str]:
        return [pod_hostname(self.cluster, i) for i in range(self.pods)]

    def bursted_hostnames(self) -> list[str]:
        return [pod_hostname(name, i) for name, size in self.bursted for i in range(size)]

    @property
    def size(self) -> int:
        """How many ranks the instance has (up or not)."""
        return len(self.hostnames())

    def pod_hostlist(self) -> str:
        """The pre-registered pods in hostlist syntax: `name-0` or `name-[0-3]`."""
        return range_hostlist(self.cluster, self.pods)

    def resource_hostlist(self) -> str:
        """The hosts R describes, each with this pod's cores (`flux R encode --local`): the pods, then the bursted
        clusters' hosts, whose brokers join as those ranks (the operator encodes R from the same list)."""
        return ",".join([self.pod_hostlist(), *(range_hostlist(name, size) for name, size in self.bursted)])

    def hostlist(self) -> str:
        """Every registered host in hostlist syntax, as the broker config's `hosts` takes it."""
        bursted = [range_hostlist(name, size) for name, size in self.bursted]
        return ",".join([self.custom or self.pod_hostlist(), *bursted, *self.extra])

    def rank_of(self, host: str) -> int | None:
        names = self.hostnames()
        return names.index(host) if host in names else None

    def with_hosts(self, hosts: Iterable[str]) -> HostRegistry:
        """The registry with more hosts appended (already registered ones are ignored)."""
        known = set(self.hostnames())
        new = tuple(h for h in hosts if h not in known)
        return HostRegistry(self.cluster, self.pods, self.custom, self.extra + new, self.bursted)


def burst_registry(lead_hosts: Iterable[str], burst: str, nodes: int) -> HostRegistry:
    """A burst's hosts: every host the lead had registered (rank order), then the burst's own pods
    `<burst>-0..nodes-1`, appended as hosts that were not pre-registered. Its `hostlist()` is the burst
    MiniCluster's spec.flux.bursting.hostlist, so `registry_for` of that spec gives the same ranks."""
    lead = HostRegistry(burst, nodes, custom=",".join(lead_hosts))
    return lead.with_hosts(pod_hostname(burst, i) for i in range(nodes))


def registry_for(mc: MiniCluster) -> HostRegistry:
    """The hosts a MiniCluster's spec registers: its pods 0..maxSize-1 then its bursted clusters' hosts, or the
    bursting hostlist (the operator ignores the clusters then; rules.py refuses both at once)."""
    custom = mc.spec.flux.bursting.hostlist
    return HostRegistry(mc.name, mc.spec.effective_max_size, custom, bursted=() if custom else bursted_clusters(mc))
