"""The broker's TOML config, in the exact format real Flux reads (flux-config-bootstrap(5)).

The builtin broker reads the same file, so one ConfigMap serves both flavours.
"""

from __future__ import annotations

from typing import Any

import tomli_w

from miniclusters.api.spec import DEFAULT_BROKER_PORT, MiniCluster
from miniclusters.render.layout import CURVE_DIR, CURVE_FILE, R_FILE, pod_hostnames, service_domain


def build_broker_config(mc: MiniCluster, namespace: str, cluster_domain: str) -> dict[str, Any]:
    """The config as data (hosts over 0..maxSize-1 so pods added later join as known ranks)."""
    spec = mc.spec
    hosts = spec.flux.bursting.hostlist or pod_hostnames(mc)
    bootstrap: dict[str, Any] = {}
    if spec.effective_max_size > 1 or spec.flux.bursting.hostlist:
        bootstrap["curve_cert"] = f"{CURVE_DIR}/{CURVE_FILE}"
    bootstrap |= {
        "default_port": DEFAULT_BROKER_PORT,
        "default_bind": "tcp://eth0:%p",
        "default_connect": f"tcp://%h.{service_domain(mc, namespace, cluster_domain)}:%p",
        "hosts": [{"host": hosts}],
    }
    return {
        "access": {"allow-guest-user": True, "allow-root-owner": True},
        "resource": {"path": R_FILE, "noverify": True},
        "sched-fluxion-qmanager": {"queue-policy": spec.flux.scheduler.queue_policy or "fcfs"},
        "bootstrap": bootstrap,
    }


def render_broker_toml(mc: MiniCluster, namespace: str, cluster_domain: str = "cluster.local") -> str:
    """TOML text; a user-supplied spec.flux.brokerConfig is used verbatim instead."""
    if mc.spec.flux.broker_config:
        return mc.spec.flux.broker_config
    header = f"# Flux broker config for MiniCluster {mc.name} (rendered by miniclusters)\n"
    return header + tomli_w.dumps(build_broker_config(mc, namespace, cluster_domain))
