"""What the tree link (tree_link.py) reads of the broker: a protocol, so the link never imports the broker."""

from __future__ import annotations

from typing import Protocol

from .bootstrap import BootstrapConfig
from .burst_ranks import BurstRanks
from .loop import Loop
from .membership import Membership, Quorum
from .overlay import Overlay
from .payloads import ResourceReport
from .port import Publisher
from .routing import Router
from .topology import Topology


class TreeHost(Publisher, Protocol):
    """The broker's facts and parts the tree link reads (broker.Broker provides them)."""

    rank: int
    size: int
    uuid: str
    hostname: str
    config: BootstrapConfig
    topology: Topology
    parent_rank: int
    child_ranks: list[int]
    subtree: list[int]
    quorum: Quorum
    rejoin: bool
    connect_timeout: float
    hb_interval: float
    hb_timeout: float
    loop: Loop
    overlay: Overlay | None
    membership: Membership
    resources: ResourceReport
    router: Router
    bursts: BurstRanks

    @property
    def bootstrap_size(self) -> int: ...

    def log(self, text: str) -> None: ...

    def debug(self, text: str) -> None: ...
