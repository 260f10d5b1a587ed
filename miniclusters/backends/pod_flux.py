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
    """Shell that puts the pod's `flux` directory on the container's own PATH for a command exec'd into the pod.
    The image's PATH stays (jobs a command submits inherit it: an application's own bin directories).

    flux-core's view goes first, as the entrypoint puts it for its broker: its `flux` sees its Python commands
    (`flux run`, `flux resource`) only with the view's `python3` found first ("not a flux command" otherwise, seen
    on the real cluster). The built-in broker's bundle goes last, as job-exec appends it to a job's PATH: its
    directory holds a `python3` too, which must not shadow the image's in the jobs submitted from here."""
    path = f"${{PATH:-{SYSTEM_PATH}}}"
    if mc.spec.flux.flavour == "builtin":
        return f'export PATH="{path}:{flux_bin(mc)}"'
    return f'export PATH="{flux_bin(mc)}:{path}"'


def flux_word(mc: MiniCluster) -> str:
    """How an exec'd command names the pod's `flux` (with flux_path_script's PATH): the view's is first on PATH and
    found as `flux`, as the entrypoint starts it (by its full path flux-core would add its own install directory to
    the jobs' PATH); the bundle's is last on PATH, so by its full path (an image may have a `flux` of its own)."""
    return f"{flux_bin(mc)}/flux" if mc.spec.flux.flavour == "builtin" else "flux"


def flux_argv(mc: MiniCluster, argv: list[str]) -> list[str]:
    """`argv` with a bare `flux` made the pod's own (flux_word)."""
    if argv and argv[0] == "flux":
        return [flux_word(mc), *argv[1:]]
    return argv


def flux_env(mc: MiniCluster) -> list[str]:
    """`env` assignments that pod's `flux` needs beyond PATH: the view's libraries for flux-core's."""
    if mc.spec.flux.flavour == "builtin":
        return []
    return [f"LD_LIBRARY_PATH={mc.spec.flux.container.mount_path}/view/lib"]
