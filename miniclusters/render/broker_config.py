"""The broker's TOML config, in the exact format real Flux reads (flux-config-bootstrap(5)).

The builtin broker reads the same file, so one ConfigMap serves both flavours.
"""

from __future__ import annotations

from typing import Any, TypedDict

import tomli_w

from miniclusters.api.hosts import registry_for
from miniclusters.api.spec import DEFAULT_BROKER_PORT, MiniCluster
from miniclusters.render.layout import CURVE_DIR, CURVE_FILE, R_FILE, service_domain

# Stated in every rendered config, because the two flavours' unstated defaults differ: flux-core falls back to
# "custom" (flat: every rank a child of rank 0) when a [bootstrap] table is present, the built-in broker to
# kary:32. A k-ary tree of fanout 32 is flat up to 33 pods and keeps rank 0's fan-in bounded beyond.
DEFAULT_TOPOLOGY = "kary:32"
# flux-core writes its KVS root (and so the job queue) to the statedir only at a clean shutdown unless told to
# checkpoint periodically: without this a crashed lead pod comes back with an empty queue. The built-in broker
# journals every job before acknowledging it and ignores the table.
KVS_CHECKPOINT_PERIOD = "1s"


class Bootstrap(TypedDict, total=False):
    curve_cert: str
    default_port: int
    default_bind: str
    default_connect: str
    hosts: list[dict[str, str]]


BrokerConfig = TypedDict(
    "BrokerConfig",
    {
        "access": dict[str, bool],
        "resource": dict[str, str | bool],
        "sched-fluxion-qmanager": dict[str, str],
        "tbon": dict[str, str],
        "kvs": dict[str, str],
        "bootstrap": Bootstrap,
    },
    total=False,
)
"""The broker config's tables (flux-config-bootstrap(5) and friends), as data."""


def build_broker_config(
    mc: MiniCluster,
    namespace: str,
    cluster_domain: str,
    *,
    curve_cert: str | None = None,
    default_bind: str | None = None,
    default_connect: str | None = None,
    hosts: list[dict[str, str]] | None = None,
    r_file: str | None = None,
) -> BrokerConfig:
    """The config as data (hosts over 0..maxSize-1 so pods added later join as known ranks).

    The keyword arguments let the local backend point at its own certificate path, connect by bare host name
    (names resolve through per-pod host entries) or give each host its own address; left out, the result is
    exactly the Kubernetes config.
    """
    spec = mc.spec
    registry = registry_for(mc)
    host_entries = hosts or [{"host": registry.hostlist()}]
    if spec.flux.bursting.lead_broker:
        host_entries = burst_host_entries(mc, hosts)
    bootstrap: Bootstrap = {}
    if registry.size > 1 or registry.custom:
        bootstrap["curve_cert"] = curve_cert or f"{CURVE_DIR}/{CURVE_FILE}"
    bootstrap["default_port"] = DEFAULT_BROKER_PORT
    bootstrap["default_bind"] = default_bind or "tcp://eth0:%p"
    bootstrap["default_connect"] = default_connect or f"tcp://%h.{service_domain(mc, namespace, cluster_domain)}:%p"
    bootstrap["hosts"] = host_entries
    config: BrokerConfig = {
        "access": {"allow-guest-user": True, "allow-root-owner": True},
        "resource": {"path": r_file or R_FILE, "noverify": True},
        "sched-fluxion-qmanager": {"queue-policy": spec.flux.scheduler.queue_policy or "fcfs"},
        "tbon": {"topo": spec.flux.topology or DEFAULT_TOPOLOGY},
        "kvs": {"checkpoint-period": KVS_CHECKPOINT_PERIOD},
        "bootstrap": bootstrap,
    }
    if spec.flux.bursting.lead_broker:
        del config["tbon"]  # a burst's shape is its hosts' parent keys (each a child of the lead)
    return config


def burst_host_entries(mc: MiniCluster, pods: list[dict[str, str]] | None) -> list[dict[str, str]]:
    """A burst's hosts table: the lead's hosts (the first reached at leadBroker's address), then its own pods,
    each a child of the lead (they join it directly: the lead registered them as ranks)."""
    lead = mc.spec.flux.bursting.lead_broker
    assert lead is not None
    registry = registry_for(mc)
    own = {entry["host"]: entry for entry in pods or []}
    names = registry.hostnames()
    entries: list[dict[str, str]] = []
    for host in names:
        if host in own or host in registry.pod_hostnames():
            entries.append({**own.get(host, {"host": host}), "parent": names[0]})
        elif host == names[0]:
            entries.append({"host": host, "connect": f"tcp://{lead.address}:{lead.port}"})
        else:
            entries.append({"host": host})
    return entries


def render_broker_toml(mc: MiniCluster, namespace: str, cluster_domain: str = "cluster.local", **local: Any) -> str:
    """TOML text; a user-supplied spec.flux.brokerConfig is used verbatim instead.

    `local` takes build_broker_config's keyword arguments (the local backend's paths and addresses).
    """
    if mc.spec.flux.broker_config:
        return mc.spec.flux.broker_config
    header = f"# Flux broker config for MiniCluster {mc.name} (rendered by miniclusters)\n"
    return header + tomli_w.dumps(build_broker_config(mc, namespace, cluster_domain, **local))
