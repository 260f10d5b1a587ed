"""Asking the lead broker (pod index 0) of a Kubernetes MiniCluster which ranks have joined: the command to run
in the lead pod (its answer is read by miniclusters/backends/overlay.py, shared with the local backend).
"""

from __future__ import annotations

from miniclusters.api.spec import MiniCluster
from miniclusters.render.layout import BROKER_INSTALL_DIR, RUN_DIR

LOCAL_URI = f"local://{RUN_DIR}/rundir/local"


def overlay_command(mc: MiniCluster) -> list[str]:
    """argv to run in the lead pod; FLUX_URI points at the broker's local socket (-Srundir)."""
    if mc.spec.flux.flavour == "builtin":
        return ["env", f"FLUX_URI={LOCAL_URI}", f"{BROKER_INSTALL_DIR}/bin/flux", "overlay", "status", "--json"]
    view = f"{mc.spec.flux.container.mount_path}/view/bin/flux"
    return ["env", f"FLUX_URI={LOCAL_URI}", view, "overlay", "status"]
