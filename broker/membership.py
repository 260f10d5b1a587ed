"""Who is in the instance: per-rank state (up/down/lost), what each rank reported, and the quorum rule.

Pure bookkeeping, no sockets: the broker feeds it hello/goodbye/timeout facts.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
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
    """The state of every rank this broker knows about (its subtree; the whole instance on rank 0).

    Sparse: a rank nobody has reported is down since the membership was made and has no entry of its own, so a
    follower of a 2,048-broker instance holds its subtree's entries, not 2,048 (`flux start --test-size` runs that
    many on one machine: 370 KB and 0.5 ms each, x 2,048 brokers). The count of up ranks is kept as they change,
    so the lead's quorum check after each join is O(1), not a scan of every rank.
    """

    def __init__(self, hostnames: Sequence[str]) -> None:
        self._hostnames = hostnames
        self._known: dict[int, RankInfo] = {}
        self._created = time.time()
        self._up = 0

    def __len__(self) -> int:
        return len(self._hostnames)

    def info(self, rank: int) -> RankInfo:
        """What is known of `rank` (a fresh down entry, not kept, for a rank nobody reported)."""
        known = self._known.get(rank)
        if known is not None:
            return known
        if not 0 <= rank < len(self._hostnames):
            raise IndexError(f"rank {rank} is not in this instance (size {len(self._hostnames)})")
        return RankInfo(rank, self._hostnames[rank], since=self._created)

    @property
    def ranks(self) -> list[RankInfo]:
        """Every rank in rank order (a read-only view: change a rank through `set`)."""
        return [self.info(rank) for rank in range(len(self._hostnames))]

    def resize(self, hostnames: Sequence[str]) -> None:
        """The instance's hosts became `hostnames` (a burst's appended, released trailing ones dropped)."""
        for rank in [r for r in self._known if r >= len(hostnames)]:
            self._up -= self._known.pop(rank).state == UP
        self._hostnames = hostnames

    def state(self, rank: int) -> str:
        known = self._known.get(rank)
        return DOWN if known is None else known.state

    def count(self, state: str) -> int:
        """How many ranks are in `state`."""
        if state == UP:
            return self._up
        return sum(1 for r in range(len(self._hostnames)) if self.state(r) == state)

    def set(self, rank: int, state: str, resources: ResourceReport | None = None, uuid: str | None = None) -> bool:
        """Record a state change; return True if anything changed."""
        info = self._known.get(rank)
        if info is None:
            info = self._known[rank] = self.info(rank)
        changed = info.state != state or (uuid is not None and uuid != info.uuid)
        if changed:
            self._up += (state == UP) - (info.state == UP)
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
        known = self._known.get(rank)
        if known is not None:
            known.resources = None

    def snapshot(self, ranks: list[int]) -> dict[str, RankEntry]:
        """JSON-able view of some ranks (sent upstream in hello/update messages)."""
        return {str(r): self.info(r).as_dict() for r in ranks}

    def merge(self, update: dict[str, RankEntry]) -> list[int]:  # JSON from a child: each entry checked
        """Apply a snapshot from a child; return the ranks that changed."""
        changed: list[int] = []
        for key, entry in update.items():
            rank = int(key)
            if not 0 <= rank < len(self._hostnames) or not isinstance(entry, dict):
                continue
            state = entry.get("state")
            if state not in STATES:
                continue
            if self.set(rank, state, resources=entry.get("resources"), uuid=entry.get("uuid")):
                changed.append(rank)
        return changed

    def in_state(self, state: str) -> list[int]:
        if state == DOWN:
            return [r for r in range(len(self._hostnames)) if self.state(r) == DOWN]
        return sorted(rank for rank, info in self._known.items() if info.state == state)

    def subtree_status(self, topology: Topology, rank: int) -> str:
        """Flux's overlay status words: full, partial (some offline), degraded (some lost), lost, offline."""
        own = self.state(rank)
        if own == LOST:
            return "lost"
        if own == DOWN:
            return "offline"
        below = [self.state(r) for r in topology.descendants(rank)]
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
        return membership.count(UP) >= self.count
