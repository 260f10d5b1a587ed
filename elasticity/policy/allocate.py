"""Placing one resource request on free cores, and telling requests that can never run."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from elasticity.model.resources import ResourceRequest

# rank -> the core ids given to the job on that rank
Allocation = dict[int, list[int]]


@dataclass(frozen=True)
class NodeCapacity:
    """One broker rank as the scheduler sees it."""

    rank: int
    cores: frozenset[int]
    up: bool = True


def free_after(free: Mapping[int, frozenset[int]], allocation: Allocation) -> dict[int, frozenset[int]]:
    out = dict(free)
    for rank, cores in allocation.items():
        out[rank] = out[rank] - frozenset(cores)
    return out


def release(free: Mapping[int, frozenset[int]], allocation: Allocation) -> dict[int, frozenset[int]]:
    out = dict(free)
    for rank, cores in allocation.items():
        out[rank] = out.get(rank, frozenset()) | frozenset(cores)
    return out


def allocate(
    request: ResourceRequest,
    free: Mapping[int, frozenset[int]],
    nodes: Mapping[int, NodeCapacity],
) -> Allocation | None:
    """Lowest ranks first; None when the request does not fit in `free` right now."""
    usable = sorted(rank for rank, node in nodes.items() if node.up and rank in free)
    need = request.cores_per_task
    if request.nnodes is not None:
        shares = sorted(request.tasks_per_node(), reverse=True)
        chosen: Allocation = {}
        for rank in usable:
            if len(chosen) == len(shares):
                break
            available = sorted(free[rank])
            if request.exclusive:
                if free[rank] == nodes[rank].cores:
                    chosen[rank] = available
                continue
            want = shares[len(chosen)] * need
            if len(available) >= want:
                chosen[rank] = available[:want]
        return chosen if len(chosen) == len(shares) else None
    remaining = request.ntasks
    picked: Allocation = {}
    for rank in usable:
        available = sorted(free[rank])
        slots = min(len(available) // need, remaining)
        if slots:
            picked[rank] = available[: slots * need]
            remaining -= slots
        if remaining == 0:
            return picked
    return None


def never_fits(request: ResourceRequest, nodes: Mapping[int, NodeCapacity], max_size: int) -> str | None:
    """Why a request can never run on this instance (reject at submit), or None if it might.

    Ranks that are down still count: a job needing them waits for them to join (elastic growth).
    Core counts are judged from the ranks that have reported; unknown ranks are assumed alike.
    """
    if request.nnodes is not None and request.nnodes > max_size:
        return f"requested {request.nnodes} nodes but the instance has at most {max_size}"
    known = [len(n.cores) for n in nodes.values() if n.cores]
    if not known:
        return None
    largest = max(known)
    if request.cores_per_task > largest:
        return f"requested {request.cores_per_task} cores per task but no node has more than {largest}"
    if request.nnodes is not None and not request.exclusive:
        busiest = max(request.tasks_per_node()) * request.cores_per_task
        if busiest > largest:
            return f"requested {busiest} cores on one node but no node has more than {largest}"
    if request.nnodes is None and request.total_cores > largest * max_size:
        return f"requested {request.total_cores} cores but the instance has at most {largest * max_size}"
    return None
