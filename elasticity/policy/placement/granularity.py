"""Granularity selection (Liu and Guitart, Algorithm 1): how many workers (pods), nodes and task groups a job gets.

N_t ranks are fixed by the job. Under `scale` a CPU- or memory-bound job gets one worker per node it may use
(N_w = N_n = min(nodes, N_t)); under `granularity` one worker per rank (N_w = N_t) on the same nodes. Either
way the workers form N_g = N_n task groups, one per node. A network-bound job stays whole: one worker on one
node (our extension: when a node's cores cannot hold all its ranks, one worker on each of the fewest nodes
that can). With no policy the user's shape stands: their worker count, no grouping.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from elasticity.policy.placement.profile_class import ProfileClass

PlacementPolicy = Literal["none", "scale", "granularity"]
PLACEMENT_POLICIES: tuple[PlacementPolicy, ...] = ("none", "scale", "granularity")


@dataclass(frozen=True)
class Granularity:
    """The job's shape: ranks (N_t), workers (N_w), nodes used (N_n) and task groups (N_g)."""

    ranks: int
    workers: int
    nodes: int
    groups: int


def select_granularity(
    ranks: int,
    profile: ProfileClass,
    policy: PlacementPolicy,
    nodes: int,
    *,
    workers_given: int | None = None,
    cores_per_node: int | None = None,
) -> Granularity:
    """Algorithm 1. `nodes` is how many nodes the job may use; `workers_given` the user's pod count (policy none)."""
    if ranks < 1:
        raise ValueError(f"a job needs at least one rank, got {ranks}")
    if nodes < 1:
        raise ValueError(f"a job needs at least one node, got {nodes}")
    if policy == "none":
        workers = workers_given if workers_given is not None else nodes
        if not 1 <= workers <= ranks:
            raise ValueError(f"{workers} workers cannot hold {ranks} ranks (between 1 and {ranks})")
        return Granularity(ranks, workers, 1, 1)
    if profile == "network":
        used = 1
        if cores_per_node is not None and ranks > cores_per_node:
            used = min(nodes, -(-ranks // cores_per_node))
        return Granularity(ranks, used, used, used)
    used = min(nodes, ranks)
    workers = used if policy == "scale" else ranks
    return Granularity(ranks, workers, used, used)
