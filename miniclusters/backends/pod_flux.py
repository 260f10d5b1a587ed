"""Where a pod's `flux` is, and what it needs to run outside the pod's entrypoint (`minicluster exec`, the wait
for the brokers): the built-in broker's bundle, or the flux-core view's binaries with the view's libraries; and
what a `flux`-flavour pod sharing its cores with other pods carries in its environment (`shared_cores_environment`).

Why the libraries: the entrypoint exports LD_LIBRARY_PATH=<view>/lib before it starts flux-broker, but a command
exec'd into the application container gets the image's own environment, and an application image (the
openmpi-openfoam one, any user's) need not have flux-core's libraries (libarchive, ...): found on the real
cluster, where `up` of an interactive `flux`-flavour MiniCluster waited for a `flux` that could not load.
"""

from __future__ import annotations

from collections.abc import Mapping

from miniclusters.api.spec import MiniCluster
from miniclusters.render.layout import BROKER_INSTALL_DIR


def flux_bin(mc: MiniCluster) -> str:
    """The directory holding the pods' `flux`: the broker bundle's or the flux-core view's (the container's own
    PATH has neither; only the entrypoint adds them)."""
    if mc.spec.flux.flavour == "builtin":
        return f"{BROKER_INSTALL_DIR}/bin"
    return f"{mc.spec.flux.container.mount_path}/view/bin"


def flux_env(mc: MiniCluster) -> list[str]:
    """`env` assignments that pod's `flux` needs beyond PATH: the view's libraries for flux-core's."""
    if mc.spec.flux.flavour == "builtin":
        return []
    return [f"LD_LIBRARY_PATH={mc.spec.flux.container.mount_path}/view/lib"]


MPI_YIELD = "OMPI_MCA_mpi_yield_when_idle"
"""Open MPI yields between polls only when it knows ranks outnumber a node's slots, and cannot know it in a
MiniCluster: each broker reports its node's cores. On pods sharing cores ranks busy-polling beside their own peers
livelocked (4 ranks of 20,000 MPI_Allreduce on 2 local pods: not done after 2 minutes; 2.3 s yielding). The
built-in broker decides per job (broker/modules/mpi.py); flux-core's job shell does not, so a `flux`-flavour pod's
environment carries it and every job submitted there inherits it."""


def shared_cores_environment(flavour: str, environment: Mapping[str, str]) -> dict[str, str]:
    """What a pod whose cores other pods share adds to its `environment` (pure): MPI_YIELD=1 for the `flux`
    flavour, unless the environment (the spec's, the image's) sets it already."""
    if flavour != "flux" or MPI_YIELD in environment:
        return {}
    return {MPI_YIELD: "1"}
