"""What a `flux`-flavour pod whose cores other pods share carries in its environment, on every backend.

Open MPI yields between polls only when it knows ranks outnumber a node's slots, and cannot know it in a
MiniCluster: each broker reports its node's cores. On pods sharing cores, ranks busy-polling beside their own
peers livelocked (4 ranks of 20,000 MPI_Allreduce on 2 local pods: not done after 2 minutes; 2.3 s yielding). The
built-in broker decides per job (broker/modules/mpi.py); flux-core's job shell does not, so a `flux`-flavour pod's
environment carries the variable and every job submitted there (by its entrypoint, `kubectl exec`, the REST API)
inherits it. Pods share cores on the local backend (unless pinned), always on podman, and on Kubernetes unless
`placement.cpus: exclusive` (the kubelet's static CPU manager gives each a core of its own).
"""

from __future__ import annotations

from collections.abc import Mapping

MPI_YIELD = "OMPI_MCA_mpi_yield_when_idle"


def shared_cores_environment(flavour: str, environment: Mapping[str, str]) -> dict[str, str]:
    """What a pod whose cores other pods share adds to its `environment` (pure): MPI_YIELD=1 for the `flux`
    flavour, unless the environment (the spec's, or the image's where the backend can read it) sets it already."""
    if flavour != "flux" or MPI_YIELD in environment:
        return {}
    return {MPI_YIELD: "1"}
