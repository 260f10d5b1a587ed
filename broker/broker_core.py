"""The broker's state and the API modules use (register, rpc, publish, subscribe, hooks).

The broker is one event loop: broker_core.py (state and module API) and broker.py (start-up, the initial program,
shutdown; what the parts call there is declared at the end of BrokerCore). tree_link.py (the parent link,
children, membership and quorum, heartbeats), routing.py (local clients, request/response/event routing),
builtin_services.py and burst_ranks.py are parts, not mixins: composed into the broker, each owning its state and
changing the broker's only through its methods (`register`, `publish`, `set_hosts`, `release_rank`, `set_state`,
`set_exit_code`, `shutdown`; tests/broker/test_broker_parts.py checks it).
"""

from __future__ import annotations

import dataclasses
import os
import socket
import subprocess
import sys
import time
import uuid as uuidlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import zmq

from .attributes import AttrError, Attributes
from .bootstrap import BootstrapConfig, BootstrapError, HostEntry
from .burst_ranks import BurstRanks
from .curve_cert import CurveCertificate
from .errors import BrokerFailure
from .loop import Loop, Timer
from .membership import Membership, Quorum, QuorumError, RankInfo
from .overlay import Overlay
from .protocol import (
    EVENT,
    Message,
)
from .routing import Router
from .service import Handler, ServiceRegistry
from .topology import Topology, TopologyError, build

if TYPE_CHECKING:
    from .broker import Broker
    from .tree_link import TreeLink

DEFAULT_HEARTBEAT_INTERVAL = 1.0
DEFAULT_HEARTBEAT_TIMEOUT = 30.0  # silence only; a closed connection is seen at once (tree_link.DISCONNECT_GRACE_BEATS)
DEFAULT_CONNECT_TIMEOUT = 30.0  # Flux's tbon.connect_timeout default
SHUTDOWN_GRACE = 5.0

ResponseCallback = Callable[[Message], None]
EventCallback = Callable[[Message], None]
Module = Callable[["Broker"], None]


class BrokerError(BrokerFailure):
    """A start-up problem; the message says what is wrong (config field, file, address)."""


class StartRefused(BrokerError):
    """Input that can never work (a hostile or damaged `content.restore` archive): the broker exits with
    refused.EXIT_REFUSED so that nothing restarts it or waits for it (broker/refused.py)."""


@dataclass
class BrokerOptions:
    """Everything `flux broker` / `flux start` collect from the command line."""

    config: BootstrapConfig
    attrs: Attributes = field(default_factory=Attributes)
    hostname: str | None = None
    command: list[str] = field(default_factory=list)
    verbose: bool = False
    modules: list[Module] = field(default_factory=list)
    handle_sigint: bool = True
    cert: CurveCertificate | None = None  # pre-loaded (test-size forks share one parse)


def _log(rank: int, text: str) -> None:
    print(f"flux-broker[{rank}]: {text}", file=sys.stderr, flush=True)


class BrokerCore:
    """A broker of the instance described by the bootstrap config, at the rank its hostname selects."""

    tree: TreeLink
    """The parent link, children, membership and quorum (tree_link.py): composed by Broker, which owns it."""

    def __init__(self, options: BrokerOptions) -> None:
        self.options = options
        self.config = options.config
        self.attrs = options.attrs
        self.verbose = options.verbose
        self.hostname = options.hostname or self.attrs.get("hostname") or os.environ.get("FLUX_FAKE_HOSTNAME")
        if not self.hostname:
            self.hostname = socket.gethostname()
        try:
            self.rank = 0 if self.config.singleton else self.config.rank_of(self.hostname)
            self.size = self.config.size
            fanout = self.attrs.integer("tbon.fanout", None)
            # As flux-core ranks them: -Stbon.topo, then -Stbon.fanout, then the config's [tbon] topo.
            topo = self.attrs.get("tbon.topo") or (self.config.topo if fanout is None else None)
            self.topology: Topology = build(self.size, topo, fanout, self.config.explicit_parents())
            self.quorum = Quorum.parse(self.attrs.get("broker.quorum"), self.size)
            self.hb_interval = self.attrs.duration("heartbeat.interval", DEFAULT_HEARTBEAT_INTERVAL)
            self.hb_timeout = self.attrs.duration("heartbeat.timeout", DEFAULT_HEARTBEAT_TIMEOUT)
            self.connect_timeout = self.attrs.duration("tbon.connect_timeout", DEFAULT_CONNECT_TIMEOUT)
            self.rejoin = self.attrs.boolean("broker.rejoin", False)
        except (BootstrapError, TopologyError, QuorumError, AttrError) as exc:
            raise BrokerError(str(exc)) from None
        if self.hb_timeout <= self.hb_interval:
            raise BrokerError(
                f"heartbeat.timeout ({self.hb_timeout}s) must exceed heartbeat.interval ({self.hb_interval}s)"
            )
        self.parent_rank = self.topology.parent(self.rank)
        self.child_ranks = self.topology.children(self.rank)
        self.subtree = self.topology.descendants(self.rank)
        self.uuid = uuidlib.uuid4().hex
        self.starttime = time.time()
        self.state = "join" if self.rank > 0 else "quorum"
        self.exit_code = 0
        self.loop = Loop()
        self.services = ServiceRegistry()
        self.membership = Membership(self.config.hostnames)
        self.bursts = BurstRanks(self)
        self.router = Router(self)
        self._close_hooks: list[Callable[[], None]] = []
        self._command: subprocess.Popen[bytes] | None = None
        self._command_fd: int | None = None
        self._shutdown_timer: Timer | None = None
        self._finishing = False
        self._created_rundir = False
        self._signal_r = -1
        self._signal_w = -1
        self._pending_signals: list[int] = []
        self.ctx: zmq.Context | None = None
        self.overlay: Overlay | None = None
        self.client_sock: zmq.Socket | None = None
        self.rundir = ""
        self.resources: dict[str, Any] = {}

    def set_hosts(self, hosts: tuple[HostEntry, ...]) -> None:
        """The instance's hosts become `hosts` (a burst's appended, released trailing ones dropped): config,
        topology (new ranks hang off rank 0), membership, size."""
        first, size = self.size, len(hosts)
        parents = list(self.topology.parents[:size]) + [0] * max(0, size - self.topology.size)
        self.config = dataclasses.replace(self.config, hosts=hosts)
        self.topology = Topology(tuple(parents), name=self.topology.name)
        del self.membership.ranks[size:]
        self.membership.ranks += [RankInfo(rank, e.host) for rank, e in enumerate(hosts[first:], start=first)]
        self.size = size
        self.child_ranks = self.topology.children(self.rank)
        self.subtree = self.topology.descendants(self.rank)
        self.attrs.set("size", self.size)
        self.attrs.set("hostlist", self.config.hostlist())

    @property
    def bootstrap_size(self) -> int:
        """The instance's configured hosts: its size without the ranks bursts add at run time (burst_ranks.py)."""
        return self.options.config.size

    def register(self, topic: str, handler: Handler) -> None:
        """Serve `topic` on this broker (e.g. "job-manager.submit", or "job-manager.*" for a whole service)."""
        self.services.register(topic, handler)

    def rpc(
        self,
        topic: str,
        payload: dict[str, Any] | None,
        nodeid: int,
        callback: ResponseCallback,
        timeout: float | None = None,
    ) -> int:
        """Send a request from this broker to any rank (or NODEID_ANY); callback gets the response Message.

        With a timeout, a request still unanswered after `timeout` seconds (e.g. its target was lost on
        the way) gets an ETIMEDOUT error response instead, and a late real response is dropped.
        """
        return self.router.rpc(topic, payload, nodeid, callback, timeout)

    def publish(self, topic: str, payload: dict[str, Any] | None = None) -> None:
        """Publish an event to every broker of the instance (sequenced by rank 0)."""
        msg = Message(EVENT, topic, payload or {}, sender=self.rank)
        if self.rank == 0:
            self.router.distribute_event(msg)
        else:
            assert self.overlay is not None
            self.overlay.send_parent(msg)

    def subscribe(self, prefix: str, callback: EventCallback) -> None:
        """Call `callback` for every event whose topic starts with `prefix`."""
        self.router.subscribe(prefix, callback)

    def on_online(self, callback: Callable[[], None]) -> None:
        """Run `callback` on rank 0 once the quorum has joined (immediately if it already has)."""
        self.tree.on_online(callback)

    def on_client_gone(self, callback: Callable[[tuple[str, ...]], None]) -> None:
        """Run `callback(route)` when a client here or below disconnects (its deferred requests can be dropped;
        Request.origin is the same route)."""
        self.router.on_client_gone(callback)

    def on_close(self, callback: Callable[[], None]) -> None:
        """Run `callback` when the broker closes (modules stop their processes, flush their files)."""
        self._close_hooks.append(callback)

    @property
    def local_uri(self) -> str:
        return f"local://{self.rundir}/local"

    def log(self, text: str) -> None:
        """A line on stderr, as flux-broker[rank] (always; _debug only with -v)."""
        _log(self.rank, text)

    def debug(self, text: str) -> None:
        """A line on stderr with -v only."""
        if self.verbose:
            _log(self.rank, text)

    def set_state(self, state: str) -> None:
        """The broker moves to `state` (join, quorum, run); `shutdown` moves it to shutdown."""
        self.state = state

    def set_exit_code(self, code: int) -> None:
        self.exit_code = code

    def release_rank(self, rank: int, reason: str) -> bool:
        """Let a rank go (a released burst's); True when its state changed (tree_link.TreeLink.release_rank)."""
        return self.tree.release_rank(rank, reason)

    # ------------------------------------------------------------------ defined by broker.py (see the module doc)
    def finish(self) -> None:
        raise NotImplementedError

    def maybe_finish_shutdown(self) -> None:
        raise NotImplementedError

    def start_command(self) -> None:
        raise NotImplementedError

    def shutdown(self, reason: str) -> None:
        raise NotImplementedError
