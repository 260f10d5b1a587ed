"""Asking the lead broker (pod index 0) of a Kubernetes MiniCluster which ranks have joined: the command to run
in the lead pod (its answer is read by miniclusters/backends/overlay.py, shared with the local backend).

The lead's socket is `<rundir>/local-0` under flux-core 0.88 and `<rundir>/local` under the built-in broker: the
command finds whichever exists, so either flavour (and an older or newer flux-core) is observed.
"""

from __future__ import annotations

from miniclusters.api.spec import MiniCluster
from miniclusters.backends.overlay import overlay_argv, with_lead_socket
from miniclusters.backends.pod_flux import flux_env, flux_path_script, flux_word
from miniclusters.render.layout import RUN_DIR

LEAD_RUNDIR = f"{RUN_DIR}/rundir"


def flux_command(mc: MiniCluster, argv: list[str]) -> list[str]:
    """`flux ARGV` with the pod's `flux`, its directory on PATH and what it needs to load (pod_flux.py), as the
    pod's broker runs it."""
    return ["env", *flux_env(mc), "sh", "-c", f'{flux_path_script(mc)}; exec "$@"', "sh", flux_word(mc), *argv]


def overlay_command(mc: MiniCluster) -> list[str]:
    """argv to run in the lead pod; FLUX_URI points at the broker's local socket (-Srundir)."""
    return with_lead_socket(LEAD_RUNDIR, flux_command(mc, overlay_argv(mc.spec.flux.flavour)[1:]))


def at_broker(mc: MiniCluster, argv: list[str]) -> list[str]:
    """A bare `flux ...` (as users type it, and as `minicluster exec` passes it) run as the pod's broker would
    run it: its `flux` at its own socket, like the local backend's exec. Anything else unchanged."""
    if not argv or argv[0] != "flux":
        return argv
    return with_lead_socket(LEAD_RUNDIR, flux_command(mc, argv[1:]))
