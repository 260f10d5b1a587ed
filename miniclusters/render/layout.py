"""Where things live inside a pod, and how rendered objects are named and labelled.

Kept in one place because the entrypoint, the Job and the broker must agree on every path.
"""

from __future__ import annotations

from miniclusters.api.spec import MiniCluster

CONFIG_DIR = "/etc/flux/config"
BROKER_TOML = "broker.toml"
CURVE_DIR = "/etc/flux/curve"
CURVE_FILE = "curve.cert"
SCRIPTS_DIR = "/etc/miniclusters"
ENTRYPOINT = "entrypoint.sh"
BURST_SPEC = "minicluster.json"
"""The MiniCluster itself, beside the entrypoint, when the lead runs the burst service (spec.flux.bursting.plugins)."""
RUN_DIR = "/run/flux"
R_FILE = f"{RUN_DIR}/R"
BROKER_INSTALL_DIR = "/mnt/miniclusters"
# The broker's local socket in its rundir: flux-core (0.88) names it `local-<rank>`, the built-in broker `local`.
LOCAL_SOCKETS = ("local-0", "local")

NAME_LABEL = "miniclusters.dev/name"
INDEX_LABEL = "batch.kubernetes.io/job-completion-index"
FIELD_MANAGER = "miniclusters"

VOLUME_CONFIG = "mc-config"
VOLUME_SCRIPTS = "mc-scripts"
VOLUME_CURVE = "mc-curve-cert"
VOLUME_BROKER = "mc-broker"
VOLUME_FLUX_VIEW = "mc-flux-view"
VOLUME_RUN = "mc-run"
VOLUME_ARCHIVE = "mc-archive"


def config_map_name(mc: MiniCluster) -> str:
    return f"{mc.name}-flux-config"


def curve_secret_name(mc: MiniCluster) -> str:
    return f"{mc.name}-curve-cert"


def common_labels(mc: MiniCluster) -> dict[str, str]:
    """Labels on every object we create, so they can be found and cleaned up together."""
    return {
        "app.kubernetes.io/name": "minicluster",
        "app.kubernetes.io/instance": mc.name,
        "app.kubernetes.io/managed-by": "miniclusters",
        NAME_LABEL: mc.name,
    }


def selector_labels(mc: MiniCluster) -> dict[str, str]:
    return {NAME_LABEL: mc.name}


def service_domain(mc: MiniCluster, namespace: str, cluster_domain: str) -> str:
    return f"{mc.headless_name}.{namespace}.svc.{cluster_domain}"
