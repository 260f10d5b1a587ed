"""Where a pod's `flux` is, and what it needs to run outside the pod's entrypoint (`minicluster exec`, the wait
for the brokers): the built-in broker's bundle, or the flux-core view's binaries with the view's libraries.

Why the libraries: the entrypoint exports LD_LIBRARY_PATH=<view>/lib before it starts flux-broker, but a command
exec'd into the application container gets the image's own environment, and an application image (the
openmpi-openfoam one, any user's) need not have flux-core's libraries (libarchive, ...): found on the real
cluster, where `up` of an interactive `flux`-flavour MiniCluster waited for a `flux` that could not load.
"""

from __future__ import annotations

from miniclusters.api.spec import MiniCluster
from miniclusters.render.layout import BROKER_INSTALL_DIR


def flux_bin(mc: MiniCluster) -> str:
    """The directory holding the pods' `flux`: the broker bundle's or the flux-core view's (the container's own
    PATH has neither; only the entrypoint adds them)."""
    if mc.spec.flux.flavour == "builtin":
        return f"{BROKER_INSTALL_DIR}/bin"
    return f"{mc.spec.flux.container.mount_path}/view/bin"


SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
"""The PATH of a container whose image sets none."""


def flux_path_script(mc: MiniCluster) -> str:
    """Shell that puts the pod's `flux` first on the container's own PATH, as the entrypoint does for the broker.
    The image's PATH stays (jobs a command submits inherit it: an application's own bin directories); and the
    flux-core view's `python3` is found there, without which flux-core's `flux` sees none of its Python commands
    (`flux run`, `flux resource`: "not a flux command", seen on the real cluster)."""
    return f'export PATH="{flux_bin(mc)}:${{PATH:-{SYSTEM_PATH}}}"'


def flux_env(mc: MiniCluster) -> list[str]:
    """`env` assignments that pod's `flux` needs beyond PATH: the view's libraries for flux-core's."""
    if mc.spec.flux.flavour == "builtin":
        return []
    return [f"LD_LIBRARY_PATH={mc.spec.flux.container.mount_path}/view/lib"]
