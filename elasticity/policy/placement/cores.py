"""Exclusive CPUs: whole cores for each pod, none shared (what the kubelet's static CPU manager does).

Pure: given the machine's CPUs, those other pods hold and how many each new pod needs, choose disjoint sets
(lowest free CPUs first, each pod's cores contiguous where possible); refuse rather than share.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

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
            f"({format_cpu_list(free) or 'none'})"
        )
    out = []
    start = 0
    for count in counts:
        out.append(tuple(free[start : start + count]))
        start += count
    return tuple(out)


def format_cpu_list(cpus: Iterable[int]) -> str:
    """The kernel's list format: 0-2,5."""
    ordered = sorted(set(cpus))
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)


def parse_cpu_list(text: str) -> tuple[int, ...]:
    """The kernel's list format back to CPUs ("" is none); ValueError on anything else."""
    cpus: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        low, _, high = part.partition("-")
        first, last = int(low), int(high) if high else int(low)
        if last < first:
            raise ValueError(f"bad CPU range {part!r}")
        cpus.extend(range(first, last + 1))
    return tuple(sorted(set(cpus)))
