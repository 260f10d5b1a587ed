"""Exclusive CPUs: whole cores for each pod, none shared (what the kubelet's static CPU manager does).

Pure: given the machine's CPUs, those other pods hold and how many each new pod needs, choose disjoint sets
(lowest free CPUs first, each pod's cores contiguous where possible); refuse rather than share.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from common import idset
from elasticity.errors import ElasticityError


class NotEnoughCores(ElasticityError):
    """The free CPUs cannot give every pod its own cores."""


def assign_cores(available: Iterable[int], taken: Iterable[int], counts: Sequence[int]) -> tuple[tuple[int, ...], ...]:
    """Disjoint core sets, one per pod in order; NotEnoughCores names the shortfall."""
    if any(c < 1 for c in counts):
        raise ValueError(f"every pod needs at least one core, got {list(counts)}")
    free = sorted(set(available) - set(taken))
    need = sum(counts)
    if need > len(free):
        raise NotEnoughCores(
            f"{need} exclusive core(s) needed for {len(counts)} pod(s) but only {len(free)} free "
            f"({idset.encode(free) or 'none'})"
        )
    out = []
    start = 0
    for count in counts:
        out.append(tuple(free[start : start + count]))
        start += count
    return tuple(out)
