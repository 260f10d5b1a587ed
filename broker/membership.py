"""Who is in the instance: per-rank state (up/down/lost), what each rank reported, and the quorum rule.

Pure bookkeeping, no sockets: the broker feeds it hello/goodbye/timeout facts.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from common import idset

from .errors import InputError
from .payloads import RankEntry, ResourceReport
from .topology import Topology

UP = "up"
DOWN = "down"  # never started, or left cleanly
LOST = "lost"  # was up, then vanished without saying goodbye
STATES = (UP, DOWN, LOST)


class QuorumError(InputError):
    """A broker.quorum value that cannot be satisfied or parsed."""


@dataclass
class RankInfo:
    """One rank as the lead sees it: its host, state, resources and broker uuid, and since when."""

    rank: int
    hostname: str
    state: str = DOWN
    resources: ResourceReport | None = None
    uuid: str = ""
    since: float = field(default_factory=time.time)

    def as_dict(self) -> RankEntry:
        return {
            "state": self.state,
            "hostname": self.hostname,
            "resources": self.resources,
            "uuid": self.uuid,
            "since": self.since,
        }


class Membership:
    """The state of every rank this broker knows about (its subtree; the whole instance on rank 0)."""

    def __init__(self, hostnames: list[str]) -> None:
        self.ranks = [RankInfo(rank, host) for rank, host in enumerate(hostnames)]

    def state(self, rank: int) -> str:
        return self.ranks[rank].state

    def set(self, rank: int, state: str, resources: ResourceReport | None = None, uuid: str | None = None) -> bool:
        """Record a state change; return True if anything changed."""
        info = self.ranks[rank]
        changed = info.state != state or (uuid is not None and uuid != info.uuid)
        if changed:
            info.state = state
            info.since = time.time()
        if uuid is not None:
            info.uuid = uuid
        if resources is not None and resources != info.resources:
            info.resources = resources
            changed = True
        return changed

    def drop_resources(self, rank: int) -> None:
        """A released rank's resources are gone (a broker joining at that rank again reports its own)."""
        self.ranks[rank].resources = None

    def snapshot(self, ranks: list[int]) -> dict[str, RankEntry]:
        """JSON-able view of some ranks (sent upstream in hello/update messages)."""
        return {str(r): self.ranks[r].as_dict() for r in ranks}

    def merge(self, update: dict[str, RankEntry]) -> list[int]:  # JSON from a child: each entry checked
        """Apply a snapshot from a child; return the ranks that changed."""
        changed: list[int] = []
        for key, entry in update.items():
            rank = int(key)
            if not 0 <= rank < len(self.ranks) or not isinstance(entry, dict):
                continue
            state = entry.get("state")
            if state not in STATES:
                continue
            if self.set(rank, state, resources=entry.get("resources"), uuid=entry.get("uuid")):
                changed.append(rank)
        return changed

    def in_state(self, state: str) -> list[int]:
        return [info.rank for info in self.ranks if info.state == state]

    def subtree_status(self, topology: Topology, rank: int) -> str:
        """Flux's overlay status words: full, partial (some offline), degraded (some lost), lost, offline."""
        own = self.ranks[rank].state
        if own == LOST:
            return "lost"
        if own == DOWN:
            return "offline"
        below = [self.ranks[r].state for r in topology.descendants(rank)]
        if LOST in below:
            return "degraded"
        if DOWN in below:
            return "partial"
        return "full"


@dataclass(frozen=True)
class Quorum:
    """The ranks that must be up for the instance to be online: a count (Flux >= 0.6x) or an idset."""

    count: int
    ranks: tuple[int, ...] = ()

    @classmethod
    def parse(cls, spec: str | None, size: int) -> Quorum:
        if spec is None or not spec.strip():
            return cls(size)
        text = spec.strip()
        if text.isdigit():
            count = int(text)
            if not 1 <= count <= size:
                raise QuorumError(f"broker.quorum={text}: must be between 1 and the instance size {size}")
            return cls(count)
        try:
            ranks = idset.decode(text)
        except idset.IdsetError as exc:
            raise QuorumError(f"broker.quorum={text}: {exc}") from None
        if not ranks or ranks[-1] >= size or 0 not in ranks:
            raise QuorumError(f"broker.quorum={text}: must be ranks of the instance (size {size}) including 0")
        return cls(len(ranks), tuple(ranks))

    def reached(self, membership: Membership) -> bool:
        if self.ranks:
            return all(membership.state(r) == UP for r in self.ranks)
        return len(membership.in_state(UP)) >= self.count
