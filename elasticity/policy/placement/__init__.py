"""Fine-grained placement of MPI jobs (Liu and Guitart): granularity, MPI-aware layout, task groups, exclusive CPUs.

Pure decisions shared by rendering (miniclusters/render), the local backend and the simulator (elasticity/sim).
"""

from elasticity.policy.placement.cores import NotEnoughCores, assign_cores
from elasticity.policy.placement.granularity import (
    PLACEMENT_POLICIES,
    Granularity,
    PlacementPolicy,
    select_granularity,
)
from elasticity.policy.placement.layout import JobLayout, Worker, exclusive_cpus, mpi_aware_layout, round_robin
from elasticity.policy.placement.profile_class import (
    PROFILE_CLASSES,
    CommunicationProfile,
    ProfileClass,
    is_network_intensive,
    mpi_fraction_from_duty,
    profile_class,
)
from elasticity.policy.placement.task_groups import (
    NodeRoom,
    Unschedulable,
    WorkerRequest,
    form_task_groups,
    place_spread,
    place_task_groups,
    score_node,
)

__all__ = [
    "PLACEMENT_POLICIES",
    "PROFILE_CLASSES",
    "CommunicationProfile",
    "Granularity",
    "JobLayout",
    "NodeRoom",
    "NotEnoughCores",
    "PlacementPolicy",
    "ProfileClass",
    "Unschedulable",
    "Worker",
    "WorkerRequest",
    "assign_cores",
    "exclusive_cpus",
    "form_task_groups",
    "is_network_intensive",
    "mpi_aware_layout",
    "mpi_fraction_from_duty",
    "place_spread",
    "place_task_groups",
    "profile_class",
    "round_robin",
    "score_node",
    "select_granularity",
]
