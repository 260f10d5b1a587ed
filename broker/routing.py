"""Routing: local clients on the ipc socket, requests up/down the tree, responses back, events to subscribers.

:class:`Router` is a part of the broker, not a mixin: it alone owns the outstanding RPCs, the event sequence and
the subscriptions (of modules and of local clients); it reads the broker's tree through :class:`RouterHost`
(rank, topology, children, overlay, client socket) and changes nothing of it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import zmq

from .loop import Loop
from .overlay import Overlay
from .port import EventCallback, ResponseCallback
from .protocol import (
    CONTROL,
    EHOSTUNREACH,
    ENOSYS,
    EPROTO,
    ETIMEDOUT,
    NODEID_ANY,
    REQUEST,
    RESPONSE,
    Message,
    PayloadError,
    ProtocolError,
)
from .service import Request, ServiceRegistry
from .topology import Topology

READS_FIRST = frozenset({"job-manager.info", "job-manager.list", "job-manager.stats", "attr.get"})
"""Requests that only read, answered ahead of the others that arrived with them (see Router.on_client)."""


class TreeView(Protocol):
    """What routing reads of the broker's place in the tree (tree_link.TreeLink)."""

    @property
    def joined(self) -> bool: ...

    def has_child(self, rank: int) -> bool: ...

    def connected_children(self) -> list[int]: ...


class RouterHost(Protocol):
    """What routing reads of the broker (broker.Broker provides it)."""

    rank: int
    size: int
    parent_rank: int
    topology: Topology
    loop: Loop
    services: ServiceRegistry
    overlay: Overlay | None
    client_sock: zmq.Socket[bytes] | None

    @property
    def tree(self) -> TreeView: ...


class Router:
    """Clients and routing (see the module docstring)."""

    def __init__(self, broker: RouterHost) -> None:
        self._b = broker
        self._matchtag = 0
        self._pending: dict[int, ResponseCallback] = {}
        self._event_seq = 0
        self._subscribers: list[tuple[str, EventCallback]] = []
        self._client_subs: dict[bytes, set[str]] = {}
        self._gone_hooks: list[Callable[[tuple[str, ...]], None]] = []

    def rpc(
        self,
        topic: str,
        payload: Mapping[str, Any] | None,  # open: any service's request payload (each has its TypedDict)
        nodeid: int,
        callback: ResponseCallback,
        timeout: float | None = None,
    ) -> int:
        """See broker.Broker.rpc."""
        self._matchtag += 1
        tag = self._matchtag
        self._pending[tag] = callback
        if timeout is not None:

            def expire() -> None:
                if tag in self._pending:
                    reason = f"{topic}: no response from rank {nodeid} within {timeout}s"
                    error = Message(RESPONSE, topic, matchtag=tag, route=["l"], errnum=ETIMEDOUT, errstr=reason)
                    self.send_response(error)

            self._b.loop.call_later(timeout, expire)
        body = payload if payload is None or isinstance(payload, dict) else dict(payload)
        msg = Message(REQUEST, topic, body or {}, nodeid=nodeid, matchtag=tag, route=["l"], sender=self._b.rank)
        self.route_request(msg)
        return tag

    def subscribe(self, prefix: str, callback: EventCallback) -> None:
        self._subscribers.append((prefix, callback))

    def on_client_gone(self, callback: Callable[[tuple[str, ...]], None]) -> None:
        """Call `callback(route)` when a client goes away, here or on a broker below: `route` is the route its
        requests arrive here with (Request.origin), so deferred answers to it can be dropped."""
        self._gone_hooks.append(callback)

    def client_gone(self, route: list[str]) -> None:
        """A client went away (its requests' route here): tell the hooks, and the parent, as flux-core's
        brokers pass a disconnect up the tree to the services that may hold its requests."""
        for hook in self._gone_hooks:
            hook(tuple(route))
        if self._b.rank > 0 and self._b.tree.joined and self._b.overlay is not None:
            self._b.overlay.send_parent(Message(CONTROL, "client.disconnect", route=list(route), sender=self._b.rank))

    def client_subscribe(self, ident: bytes, topic: str) -> None:
        self._client_subs.setdefault(ident, set()).add(topic)

    def client_unsubscribe(self, ident: bytes, topic: str) -> None:
        self._client_subs.get(ident, set()).discard(topic)

    def on_client(self) -> None:
        """Everything the clients sent since the last look; reads (READS_FIRST) are answered before the rest.

        Why: a read of a job waited behind each submit that arrived just before it (each costs the job
        manager about a millisecond), which under a stream of submits is most of a read's delay. A client's
        own requests keep their order: a read goes first only when its client sent nothing before it here."""
        assert self._b.client_sock is not None
        later: list[tuple[bytes, Message]] = []
        writers: set[bytes] = set()
        while True:
            try:
                frames = self._b.client_sock.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                break
            if len(frames) != 2:
                continue
            ident, data = frames
            try:
                msg = Message.decode_checked(data)
            except PayloadError as exc:  # too deep or undecodable: the sender hears why, the broker reads on
                if exc.header.type == REQUEST:
                    self._send_client(ident, exc.header.error(EPROTO, str(exc)))
                continue
            except ProtocolError:
                continue
            if msg.type == REQUEST:
                msg.route = [f"c:{ident.hex()}"]
                msg.sender = self._b.rank
                if msg.topic in READS_FIRST and ident not in writers:
                    self.route_request(msg)
                else:
                    writers.add(ident)
                    later.append((ident, msg))
            elif msg.type == CONTROL and msg.topic == "client.disconnect":
                later.append((ident, msg))
        for ident, msg in later:
            if msg.type == REQUEST:
                self.route_request(msg)
            else:
                self._client_subs.pop(ident, None)
                self.client_gone([f"c:{ident.hex()}"])

    def _send_client(self, ident: bytes, msg: Message) -> None:
        assert self._b.client_sock is not None
        try:
            self._b.client_sock.send_multipart([ident, msg.encode()], zmq.NOBLOCK)
        except zmq.ZMQError as exc:
            if exc.errno != zmq.EHOSTUNREACH:  # not "the client went away": say so (the socket has no send limit)
                print(f"flux-broker[{self._b.rank}]: cannot answer a client ({msg.topic}): {exc}", file=sys.stderr)
            self._client_subs.pop(ident, None)

    def route_request(self, msg: Message) -> None:
        target = msg.nodeid
        if target == NODEID_ANY or target == self._b.rank:
            handler = self._b.services.lookup(msg.topic)
            if handler is not None:
                self._b.services.dispatch(handler, Request(msg, self.send_response))
                return
            if target == self._b.rank or self._b.rank == 0:
                self.send_response(msg.error(ENOSYS, f"{msg.topic}: no such service on rank {self._b.rank}"))
                return
            hop = self._b.parent_rank
        elif target < 0 or (target >= self._b.size and self._b.rank == 0):
            self.send_response(msg.error(EHOSTUNREACH, f"rank {target} is not in this instance (size {self._b.size})"))
            return
        elif target >= self._b.size:
            hop = self._b.parent_rank  # a rank the lead registered later (a burst): only the lead knows the way
        else:
            hop = self._b.topology.next_hop(self._b.rank, target)
        assert self._b.overlay is not None
        if hop == self._b.parent_rank:
            if not self._b.tree.joined or not self._b.overlay.send_parent(msg):
                self.send_response(msg.error(EHOSTUNREACH, f"rank {self._b.rank} is not connected to its parent"))
        elif not self._b.tree.has_child(hop) or not self._b.overlay.send_child(hop, msg):
            self.send_response(msg.error(EHOSTUNREACH, f"rank {target} is unreachable: rank {hop} is down"))

    def send_response(self, msg: Message) -> None:
        if not msg.route:
            return
        hop = msg.route.pop()
        assert self._b.overlay is not None
        if hop == "l":
            callback = self._pending.pop(msg.matchtag, None)
            if callback is not None:
                callback(msg.decoded())
        elif hop == "p":
            self._b.overlay.send_parent(msg)
        elif hop.startswith("r:"):
            self._b.overlay.send_child(int(hop[2:]), msg)
        elif hop.startswith("c:"):
            self._send_client(bytes.fromhex(hop[2:]), msg)

    def distribute_event(self, msg: Message) -> None:
        """Deliver an event here and pass it down the tree (rank 0 stamps the sequence number)."""
        if self._b.rank == 0:
            self._event_seq += 1
            msg.seq = self._event_seq
        for prefix, callback in list(self._subscribers):
            if msg.topic.startswith(prefix):
                callback(msg)
        for ident, prefixes in list(self._client_subs.items()):
            if any(msg.topic.startswith(p) for p in prefixes):
                self._send_client(ident, msg)
        assert self._b.overlay is not None
        for rank in self._b.tree.connected_children():
            self._b.overlay.send_child(rank, msg)
