"""The broker's answers the client commands render (`flux resource`, `flux overlay`, `flux queue`): fixed JSON
shapes, typed once where each answer enters (commands.py), so the renderers read named keys.

TypedDicts only; a lean command imports this module only for type checking.
"""

from __future__ import annotations

from typing import Any, TypedDict


class ResourceStatus(TypedDict):
    """resource.status on the lead: the up and down ranks (idsets), hostnames and per-rank reports (and R,
    which no command here reads: `flux resource R` asks resource.R)."""

    up: str
    down: str
    hostnames: list[str]
    reports: dict[str, RankReport]


class RankReport(TypedDict, total=False):
    """What a broker reports of its node (resource.status' `reports`, by rank; broker/resources.local_resources)."""

    rank: int
    hostname: str
    cores: str
    ncores: int
    memory: int


class PendingJob(TypedDict):
    """A pending job in job-manager.queue-state: the nodes it needs and its time limit."""

    id: int
    nnodes: int
    duration: float


class RunningJob(TypedDict):
    """A running job in job-manager.queue-state: its ranks and the cores it holds on each."""

    id: int
    ranks: list[int]
    cores: dict[str, int]


class DrainEntry(TypedDict):
    """Why and since when a rank is drained (queue-state's `drain`, by rank)."""

    reason: str
    timestamp: float


class QueueState(TypedDict, total=False):
    """job-manager.queue-state: pending and running jobs, drained ranks and why."""

    pending: list[PendingJob]
    running: list[RunningJob]
    drained: list[int]
    drain: dict[str, DrainEntry]


class OverlayRank(TypedDict):
    """One broker in overlay.status."""

    rank: int
    hostname: str
    state: str
    status: str
    parent: int | None
    since: float
    burst: str


class OverlayStatus(TypedDict, total=False):
    """overlay.status: the tree (each rank's parent) and each broker's state."""

    size: int
    topology: str
    parents: list[int]
    state: str
    ranks: list[OverlayRank]


class WireMessage(TypedDict, total=False):
    """One broker message as JSON on the wire (broker/protocol.py): its kind (req, rsp, evt), topic, matchtag,
    target rank, payload, and on an error response its errno and text."""

    t: str
    topic: str
    m: int
    n: int
    p: dict[str, Any]  # open: the payload, its shape the topic's
    e: int
    es: str
