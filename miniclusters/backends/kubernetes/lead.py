"""Asking the lead broker (pod index 0) of a Kubernetes MiniCluster which ranks have joined: the command to run
in the lead pod (its answer is read by miniclusters/backends/overlay.py, shared with the local backend).

The lead's socket is `<rundir>/local-0` under flux-core 0.88 and `<rundir>/local` under the built-in broker: the
command finds whichever exists, so either flavour (and an older or newer flux-core) is observed.
"""

from __future__ import annotations

from miniclusters.api.spec import MiniCluster
from miniclusters.backends.overlay import overlay_argv, with_lead_socket
from miniclusters.render.layout import BROKER_INSTALL_DIR, RUN_DIR

LEAD_RUNDIR = f"{RUN_DIR}/rundir"


def overlay_command(mc: MiniCluster) -> list[str]:
    """argv to run in the lead pod; FLUX_URI points at the broker's local socket (-Srundir)."""
    if mc.spec.flux.flavour == "builtin":
        flux = f"{BROKER_INSTALL_DIR}/bin/flux"
    else:
        flux = f"{mc.spec.flux.container.mount_path}/view/bin/flux"
    return with_lead_socket(LEAD_RUNDIR, overlay_argv(mc.spec.flux.flavour, flux))
