"""The tree-based overlay's shape: who is whose parent. Pure functions, no sockets."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from broker.errors import InputError

DEFAULT_FANOUT = 32  # Flux's default k-ary fanout


class TopologyError(InputError):
    """A topology specification that cannot describe a tree over the instance's ranks."""


@dataclass(frozen=True)
class Topology:
    """parents[r] is the parent rank of r; parents[0] == -1 (the lead is the root)."""

    parents: tuple[int, ...]
    name: str = "custom"
    _children: dict[int, list[int]] = field(default_factory=dict, init=False, repr=False, compare=False)
    _descendants: dict[int, list[int]] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for rank, parent in enumerate(self.parents):
            self._children.setdefault(parent, []).append(rank)

    @property
    def size(self) -> int:
        return len(self.parents)

    def parent(self, rank: int) -> int:
        return self.parents[rank]

    def children(self, rank: int) -> list[int]:
        return list(self._children.get(rank, []))

    def ancestors(self, rank: int) -> list[int]:
        """Parent, grandparent, ... up to rank 0."""
        chain: list[int] = []
        node = self.parents[rank]
        while node != -1:
            chain.append(node)
            node = self.parents[node]
        return chain

    def depth(self, rank: int) -> int:
        return len(self.ancestors(rank))

    def descendants(self, rank: int) -> list[int]:
        """Every rank below `rank` (sorted); cached, since routing and membership ask often."""
        cached = self._descendants.get(rank)
        if cached is None:
            below: list[int] = []
            stack = list(self._children.get(rank, []))
            while stack:
                node = stack.pop()
                below.append(node)
                stack.extend(self._children.get(node, []))
            cached = self._descendants[rank] = sorted(below)
        return list(cached)

    def next_hop(self, here: int, target: int) -> int:
        """The neighbour of `here` a message for `target` goes to next (here itself if target == here)."""
        if target == here:
            return here
        previous = target
        node = self.parents[target]
        while node != -1:
            if node == here:
                return previous
            previous = node
            node = self.parents[node]
        return self.parents[here]

    def path(self, source: int, target: int) -> list[int]:
        """Ranks a message visits from source to target, both included."""
        hops = [source]
        while hops[-1] != target:
            hops.append(self.next_hop(hops[-1], target))
        return hops


@functools.lru_cache(maxsize=8)
def kary(size: int, fanout: int) -> Topology:
    """Rank r's parent is (r - 1) // fanout; fanout 0 means flat (every rank a child of 0).

    Cached (a Topology never changes once made): `flux start --test-size` builds its brokers' tree once before
    forking them, so that N brokers share it instead of each building an N-rank tree of its own."""
    if size < 1:
        raise TopologyError(f"size must be >= 1, got {size}")
    if fanout < 0:
        raise TopologyError(f"fanout must be >= 0, got {fanout}")
    if fanout == 0:
        return Topology(tuple([-1] + [0] * (size - 1)), name="kary:0")
    return Topology(tuple([-1] + [(r - 1) // fanout for r in range(1, size)]), name=f"kary:{fanout}")


def custom(size: int, explicit: dict[int, int]) -> Topology:
    """Explicit parent ranks (from `parent` keys); ranks without one hang off rank 0."""
    if 0 in explicit:
        raise TopologyError("rank 0 (the lead) cannot have a parent")
    parents = [-1] + [explicit.get(r, 0) for r in range(1, size)]
    for rank, parent in explicit.items():
        if not 0 <= parent < size:
            raise TopologyError(f"rank {rank}: parent rank {parent} is out of range")
        if parent == rank:
            raise TopologyError(f"rank {rank} cannot be its own parent")
    for rank in range(1, size):
        seen = {rank}
        node = parents[rank]
        while node != -1:
            if node in seen:
                raise TopologyError(f"parent keys form a cycle through rank {rank}")
            seen.add(node)
            node = parents[node]
    return Topology(tuple(parents), name="custom")


def parse_topo(spec: str) -> int:
    """'kary:N' -> N (the only named family supported besides 'custom')."""
    kind, _, arg = spec.partition(":")
    if kind != "kary":
        raise TopologyError(f"unsupported tbon.topo {spec!r} (supported: kary:N, custom)")
    try:
        fanout = int(arg)
    except ValueError:
        raise TopologyError(f"invalid tbon.topo {spec!r}: expected kary:N with an integer N") from None
    if fanout < 0:
        raise TopologyError(f"invalid tbon.topo {spec!r}: N must be >= 0")
    return fanout


def build(size: int, topo: str | None, fanout: int | None, explicit: dict[int, int]) -> Topology:
    """Choose the topology like Flux: explicit parent keys, else tbon.topo / tbon.fanout, else kary:32."""
    if explicit:
        if topo not in (None, "custom") or fanout is not None:
            raise TopologyError("[bootstrap] hosts carry parent keys; do not also set tbon.topo/tbon.fanout")
        return custom(size, explicit)
    if topo is not None and topo != "custom":
        return kary(size, parse_topo(topo))
    if topo == "custom":
        return kary(size, 0)
    return kary(size, DEFAULT_FANOUT if fanout is None else fanout)
