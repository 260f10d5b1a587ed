"""Bursting by hand (`minicluster burst`): the one door into bursting for the product's CLI.

The CLI hands over what its backend knows of the lead (`lead_context(name)`: the lead's URI, the burst state
file and the plugins' context) and gets back a finished burst or a typed error, so it never reaches into the
burst service, its plugins or their discovery (an import-linter contract keeps it so).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NotRequired, TypedDict

from bursting.discovery import plugin_factories
from bursting.lead import HandleLead
from bursting.plugin import BurstError, LeadContext
from bursting.service import BurstRefused, BurstService, UnknownBurst
from bursting.state_file import StateFile

if TYPE_CHECKING:
    from miniclusters.kube_shapes import Manifest

JOIN_TIMEOUT = 180.0


class LeadContextFields(TypedDict):
    """plugin.LeadContext's fields as a backend hands them over."""

    cluster: str
    spec: Manifest
    """The lead MiniCluster as a Kubernetes object, copied into bursts as is."""
    certificate: str
    broker_port: NotRequired[int]
    namespace: NotRequired[str]
    options: NotRequired[dict[str, str]]


class LeadAccess(TypedDict):
    """What a backend's `lead_context(name)` knows of the lead: its broker's URI, the burst state file, and the
    context the plugins get."""

    lead_uri: str
    state_file: str
    context: LeadContextFields


class UnknownPlugin(BurstError, LookupError):
    """A plugin name that is not installed (the message lists the installed ones)."""


@dataclass(frozen=True)
class Joined:
    """A burst whose brokers joined the lead."""

    name: str
    ranks: tuple[int, ...]
    hosts: tuple[str, ...]


def _service(cluster: str, lead: LeadAccess, plugin: str) -> BurstService:
    try:
        factory = plugin_factories([plugin])[plugin]
    except LookupError as exc:
        raise UnknownPlugin(str(exc.args[0]) if exc.args else str(exc)) from None
    context = LeadContext(**lead["context"])
    return BurstService(
        cluster, HandleLead(lead["lead_uri"]), {plugin: factory(context)}, StateFile(Path(lead["state_file"]))
    )


def burst(cluster: str, lead: LeadAccess, plugin: str, nodes: int, join_timeout: float = JOIN_TIMEOUT) -> Joined:
    """Bring up `nodes` followers through `plugin` and wait until they joined the lead as new ranks.

    Raises UnknownPlugin, BurstRefused (the plugin's limit, e.g. spec.flux.bursting.plugins size) or BurstError
    (the burst failed, or its brokers did not join within `join_timeout` seconds)."""
    service = _service(cluster, lead, plugin)
    record = service.burst(plugin, nodes, manual=True)
    if record.state == "failed":
        raise BurstError(f"burst {record.name} via {plugin} failed: {record.reason}")
    deadline = time.monotonic() + join_timeout
    while not set(record.ranks) <= service.lead.nodes().burst_ranks_up:
        if time.monotonic() > deadline:
            raise BurstError(f"burst {record.name}: its brokers did not join the lead within {join_timeout:g} s")
        time.sleep(0.3)
    return Joined(record.name, tuple(record.ranks), tuple(record.burst().hosts))


def release(cluster: str, lead: LeadAccess, plugin: str, name: str) -> None:
    """Tear down the burst `name` (as `minicluster status` names it). Raises UnknownPlugin or UnknownBurst."""
    _service(cluster, lead, plugin).release(name)


__all__ = [
    "BurstError",
    "BurstRefused",
    "Joined",
    "LeadAccess",
    "LeadContextFields",
    "UnknownBurst",
    "UnknownPlugin",
    "burst",
    "release",
]
