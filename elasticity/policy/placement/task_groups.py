"""Task-group scheduling (Liu and Guitart, Algorithms 3 and 4): a job's workers in N_g groups, one node per group.

Algorithm 3 deals the workers into groups, each joining the group with the smallest total request so far (ties:
the group with fewer members, then the lower index), so groups come out even. Workers are then bound group by
group; for each, the nodes where it fits (the default scheduler's filters: free CPU and memory) are scored by
Algorithm 4: the size of its group, plus one for each member of its group already on the node, minus one for
each other group of the same job already there. The best score wins; ties go to the node with the most free
CPU (the default scheduler's spreading), then the name. Affinity within a group, anti-affinity across groups.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from elasticity.errors import ElasticityError


@dataclass(frozen=True)
class NodeRoom:
    """A node's free capacity as the scheduler's filters see it."""

    name: str
    free_cpu_milli: int
    free_memory_bytes: int

    def fits(self, cpu_milli: int, memory_bytes: int) -> bool:
        return cpu_milli <= self.free_cpu_milli and memory_bytes <= self.free_memory_bytes


@dataclass(frozen=True)
class WorkerRequest:
    index: int
    cpu_milli: int
    memory_bytes: int


class Unschedulable(ElasticityError):
    """Some worker fits on no node; the job waits (no worker is bound: gang semantics)."""


def form_task_groups(requests: Sequence[WorkerRequest], groups: int) -> tuple[tuple[int, ...], ...]:
    """Algorithm 3's grouping: worker indexes per group, each group in worker order."""
    if groups < 1:
        raise ValueError(f"at least one group, got {groups}")
    if groups > max(1, len(requests)):
        raise ValueError(f"{groups} groups for {len(requests)} workers: a group would be empty")
    totals = [0] * groups
    members: list[list[int]] = [[] for _ in range(groups)]
    for request in requests:
        target = min(range(groups), key=lambda g: (totals[g], len(members[g]), g))
        totals[target] += request.cpu_milli
        members[target].append(request.index)
    return tuple(tuple(m) for m in members)


def score_node(node: str, group: int, group_size: int, bound: Mapping[int, str], group_of: Mapping[int, int]) -> int:
    """Algorithm 4 for one worker of `group` on `node`, given the job's workers bound so far (worker -> node)."""
    same = sum(1 for worker, where in bound.items() if where == node and group_of[worker] == group)
    others = {group_of[worker] for worker, where in bound.items() if where == node and group_of[worker] != group}
    return group_size + same - len(others)


def place_task_groups(
    requests: Sequence[WorkerRequest], groups: tuple[tuple[int, ...], ...], nodes: Sequence[NodeRoom]
) -> dict[int, str]:
    """Bind every worker to a node (worker index -> node name), group by group; Unschedulable if one cannot fit."""
    by_index = {r.index: r for r in requests}
    group_of = {worker: g for g, members in enumerate(groups) for worker in members}
    room = {n.name: n for n in nodes}
    bound: dict[int, str] = {}
    for g, members in enumerate(groups):
        for worker in members:
            request = by_index[worker]
            feasible = [n for n in room.values() if n.fits(request.cpu_milli, request.memory_bytes)]
            if not feasible:
                raise Unschedulable(f"worker {worker} ({request.cpu_milli}m CPU) fits on no node")
            best = min(
                feasible,
                key=lambda n: (
                    -score_node(n.name, g, len(members), bound, group_of),
                    -n.free_cpu_milli,
                    -n.free_memory_bytes,
                    n.name,
                ),
            )
            bound[worker] = best.name
            room[best.name] = replace(
                best,
                free_cpu_milli=best.free_cpu_milli - request.cpu_milli,
                free_memory_bytes=best.free_memory_bytes - request.memory_bytes,
            )
    return bound


def place_spread(requests: Sequence[WorkerRequest], nodes: Sequence[NodeRoom]) -> dict[int, str]:
    """The default scheduler without task groups: each worker to the feasible node with the most free CPU."""
    room = {n.name: n for n in nodes}
    bound: dict[int, str] = {}
    for request in requests:
        feasible = [n for n in room.values() if n.fits(request.cpu_milli, request.memory_bytes)]
        if not feasible:
            raise Unschedulable(f"worker {request.index} ({request.cpu_milli}m CPU) fits on no node")
        best = min(feasible, key=lambda n: (-n.free_cpu_milli, -n.free_memory_bytes, n.name))
        bound[request.index] = best.name
        room[best.name] = replace(
            best,
            free_cpu_milli=best.free_cpu_milli - request.cpu_milli,
            free_memory_bytes=best.free_memory_bytes - request.memory_bytes,
        )
    return bound
