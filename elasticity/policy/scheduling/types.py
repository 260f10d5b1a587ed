"""The snapshot a scheduling policy reads and the decisions it returns (whole nodes, as on a batch system)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from elasticity.model.speedup import JobSize


@dataclass(frozen=True, slots=True)
class WaitingJob:
    """A job in the queue, as the scheduling policies see it."""

    job: int
    submit: float
    size: JobSize
    """Rigid jobs have min == pref == max."""
    estimate: float
    """Requested time (seconds) at the preferred size; math.inf if unlimited."""
    priority: int = 1


@dataclass(frozen=True, slots=True)
class RunningJob:
    """A running job, as the scheduling policies see it."""

    job: int
    nodes: int
    size: JobSize
    expected_end: float
    """When the job ends if it runs as long as its requested time says (at its current size)."""
    priority: int = 1
    last_resize: float = -math.inf
    """Start or last resize: the elastic policy keeps a minimum gap between two rescales of one job."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The cluster and queue at one instant: what a scheduling policy decides from."""

    now: float
    nodes: int
    running: tuple[RunningJob, ...]
    waiting: tuple[WaitingJob, ...]
    """In queue order (submission order unless the policy says otherwise)."""

    @property
    def free(self) -> int:
        return self.nodes - sum(r.nodes for r in self.running)


@dataclass(frozen=True, slots=True)
class Start:
    """Start a waiting job on this many nodes."""

    job: int
    nodes: int


@dataclass(frozen=True, slots=True)
class Resize:
    """Expand (more nodes than now) or shrink a running malleable job."""

    job: int
    nodes: int


@dataclass(frozen=True, slots=True)
class Reserve:
    """The queue's head reserved: it starts at `at` on this many nodes."""

    job: int
    at: float
    nodes: int


@dataclass(frozen=True, slots=True)
class Decisions:
    """A policy's answer to one snapshot: jobs to start, jobs to resize, the reservation."""

    starts: tuple[Start, ...] = ()
    resizes: tuple[Resize, ...] = ()
    reservation: Reserve | None = None
