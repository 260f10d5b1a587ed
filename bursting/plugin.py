"""The burst plugin interface: what a plugin is told, what it answers, what it must do.

A plugin is found through the `miniclusters.burst_plugins` entry point group (discovery.py); the entry point
names a callable taking the lead's `LeadContext` and returning a `BurstPlugin`. The service asks every plugin
`can_satisfy` (cheap, no side effects: credentials, quota, reachability), lets the selection function pick one,
then calls `launch` and, once the burst's jobs are done and its idle period passed, `teardown`. Failures are
`BurstError`s whose message is shown to users as the job's pending reason; a plugin never lets anything else out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from miniclusters.kube_shapes import Manifest


class BurstError(RuntimeError):
    """The root of bursting's errors (BurstRefused, UnknownBurst, manual.UnknownPlugin are kinds of it); raised
    as such, a plugin could not do what was asked and the message says why (shown as the job's pending reason)."""


@dataclass(frozen=True)
class LeadContext:
    """What plugins know about the MiniCluster they burst for."""

    cluster: str
    """The lead MiniCluster's name."""
    spec: Manifest
    """The lead MiniCluster (as a dict): bursts run the same containers."""
    certificate: str
    """The instance's CURVE certificate (zcert text): burst brokers must hold the same key."""
    broker_port: int = 8050
    namespace: str = ""
    options: dict[str, str] = field(default_factory=dict)
    """Plugin settings (e.g. kubeconfig context, namespace, service type), from the CLI or the environment."""

    def size_limit(self, plugin: str) -> int | None:
        """The most nodes the spec lets `plugin` bring at once (`spec.flux.bursting.plugins[].size`; 0 or no
        entry: none of its own). Every plugin's `can_satisfy` obeys it, so the loop and `burst --nodes` do."""
        plugins = self.spec.get("spec", {}).get("flux", {}).get("bursting", {}).get("plugins", [])
        sizes = [int(p["size"]) for p in plugins if p.get("name") == plugin and p.get("size")]
        return min(sizes) if sizes else None


@dataclass(frozen=True)
class Burst:
    """One burst: a set of follower brokers under one host prefix, registered as ranks of the lead."""

    name: str
    """The burst's name; its hosts are `<name>-0 .. <name>-(nodes-1)`, its prefix `<name>-`."""
    nodes: int
    plugin: str
    lead_hosts: tuple[str, ...] = ()
    """Every host the lead had registered before this burst, rank order (the burst's ranks follow)."""
    lead_address: str = ""
    """Where the burst's brokers reach the lead (host or IP), filled in by the plugin's `expose`."""
    lead_port: int = 8050

    @property
    def prefix(self) -> str:
        return f"{self.name}-"

    @property
    def hosts(self) -> tuple[str, ...]:
        return tuple(f"{self.name}-{i}" for i in range(self.nodes))


@dataclass(frozen=True)
class Verdict:
    """A plugin's answer to `can_satisfy`."""

    ok: bool
    reason: str = ""


@runtime_checkable
class BurstPlugin(Protocol):
    """What every burst plugin implements."""

    name: str

    def can_satisfy(self, nodes: int) -> Verdict:
        """Can this plugin bring up `nodes` followers now? No side effects."""
        ...

    def expose(self, burst: Burst) -> tuple[str, int]:
        """Make the lead's broker reachable from where the burst runs; return (address, port). Idempotent."""
        ...

    def launch(self, burst: Burst) -> None:
        """Bring up the burst's followers (they connect to `burst.lead_address`). Raises BurstError."""
        ...

    def teardown(self, burst: Burst) -> None:
        """Remove the burst's followers and whatever `expose` created for it. Idempotent."""
        ...
