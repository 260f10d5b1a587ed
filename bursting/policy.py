"""When to burst, which plugin, when to tear a burst down: pure functions of the observed queue and bursts.

The service (service.py) feeds them what the lead reports and acts on their answers; tests drive them directly.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from bursting.plugin import Verdict

PENDING_STATES = frozenset({"DEPEND", "PRIORITY", "SCHED"})
ACTIVE_STATES = PENDING_STATES | {"NEW", "RUN", "CLEANUP"}


@dataclass(frozen=True)
class QueuedJob:
    """A job as the lead lists it."""

    id: int
    state: str
    nnodes: int
    """Nodes asked for (pending) or held (running); 0 when the job gave only tasks."""
    ntasks: int = 1
    burstable: bool = False
    ranks: tuple[int, ...] = ()


@dataclass(frozen=True)
class ActiveBurst:
    """A burst the service runs: its ranks on the lead and since when none of its ranks has had work."""

    name: str
    nodes: int
    ranks: tuple[int, ...]
    idle_since: float | None = None


@dataclass(frozen=True)
class BurstNeed:
    """A pending burstable job and how many more nodes it needs than the instance has."""

    job: int
    nodes: int


def nodes_needed(job: QueuedJob, cores_per_node: int) -> int:
    """Nodes a job needs: what it asked for, or its tasks spread over nodes of this size."""
    if job.nnodes:
        return job.nnodes
    return max(1, math.ceil(job.ntasks / max(1, cores_per_node)))


def burst_needs(
    jobs: Sequence[QueuedJob], nodes_present: int, bursting_nodes: int, cores_per_node: int
) -> list[BurstNeed]:
    """Pending burstable jobs that cannot run on the nodes present plus those bursts already bring.

    One need at a time (the first job in queue order): a burst takes a few seconds, and the next job may fit
    the nodes this one brings.
    """
    have = nodes_present + bursting_nodes
    for job in jobs:
        if job.state not in PENDING_STATES or not job.burstable:
            continue
        want = nodes_needed(job, cores_per_node)
        if want > have:
            return [BurstNeed(job.id, want - have)]
    return []


Selector = Callable[[BurstNeed, Mapping[str, Verdict]], "str | None"]
"""Chooses a plugin for a need from every plugin's verdict (in discovery order); None when none fits."""


def first_able(need: BurstNeed, verdicts: Mapping[str, Verdict]) -> str | None:
    """The default selection: the first plugin (discovery order, `local` first) that says it can."""
    return next((name for name, verdict in verdicts.items() if verdict.ok), None)


def refusal(verdicts: Mapping[str, Verdict]) -> str:
    """Why no plugin took a need (each plugin's reason), for the job's pending reason."""
    if not verdicts:
        return "no burst plugin is installed"
    return "; ".join(f"{name}: {v.reason or 'declined'}" for name, v in verdicts.items())


def idle_marks(bursts: Sequence[ActiveBurst], jobs: Sequence[QueuedJob], now: float) -> list[ActiveBurst]:
    """Bursts with their idle clock: reset while any active job holds one of its ranks, started when none does."""
    busy = {r for job in jobs if job.state in ACTIVE_STATES for r in job.ranks}
    marked = []
    for burst in bursts:
        in_use = any(r in busy for r in burst.ranks)
        idle_since = None if in_use else (burst.idle_since if burst.idle_since is not None else now)
        marked.append(ActiveBurst(burst.name, burst.nodes, burst.ranks, idle_since))
    return marked


def to_tear_down(
    bursts: Sequence[ActiveBurst],
    jobs: Sequence[QueuedJob],
    now: float,
    idle_period: float,
    nodes_present: int = 0,
    cores_per_node: int = 1,
) -> list[str]:
    """Bursts idle for the idle period, unless a pending burstable job that fits the nodes present (bursts
    included) is about to take their nodes; a job too big even with them does not keep them up."""
    about_to_run = any(
        job.burstable and job.state in PENDING_STATES and nodes_needed(job, cores_per_node) <= nodes_present
        for job in jobs
    )
    if about_to_run:
        return []
    return [b.name for b in bursts if b.idle_since is not None and now - b.idle_since >= idle_period]


def burst_name(cluster: str, taken: Sequence[str]) -> str:
    """`<cluster>-b<N>`: the first N not taken (its hosts `<cluster>-b<N>-<i>` never look like the lead's pods)."""
    n = 1
    while f"{cluster}-b{n}" in taken:
        n += 1
    return f"{cluster}-b{n}"
