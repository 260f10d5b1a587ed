"""Routing: local clients on the ipc socket, requests up/down the tree, responses back, events to subscribers."""

from __future__ import annotations

import zmq

from .broker_core import BrokerCore
from .protocol import (
    CONTROL,
    EHOSTUNREACH,
    ENOSYS,
    NODEID_ANY,
    REQUEST,
    Message,
    ProtocolError,
)
from .service import Request

READS_FIRST = frozenset({"job-manager.info", "job-manager.list", "job-manager.stats", "attr.get"})
"""Requests that only read, answered ahead of the others that arrived with them (see Routing._on_client)."""


class Routing(BrokerCore):
    """Clients and routing."""

    def _on_client(self) -> None:
        """Everything the clients sent since the last look; reads (READS_FIRST) are answered before the rest.

        Why: a read of a job waited behind each submit that arrived just before it (each costs the job
        manager about a millisecond), which under a stream of submits is most of a read's delay. A client's
        own requests keep their order: a read goes first only when its client sent nothing before it here."""
        assert self.client_sock is not None
        later: list[tuple[bytes, Message]] = []
        writers: set[bytes] = set()
        while True:
            try:
                frames = self.client_sock.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                break
            if len(frames) != 2:
                continue
            ident, data = frames
            try:
                msg = Message.decode(data)
            except ProtocolError:
                continue
            if msg.type == REQUEST:
                msg.route = [f"c:{ident.hex()}"]
                msg.sender = self.rank
                if msg.topic in READS_FIRST and ident not in writers:
                    self._route_request(msg)
                else:
                    writers.add(ident)
                    later.append((ident, msg))
            elif msg.type == CONTROL and msg.topic == "client.disconnect":
                later.append((ident, msg))
        for ident, msg in later:
            if msg.type == REQUEST:
                self._route_request(msg)
            else:
                self._client_subs.pop(ident, None)

    def _send_client(self, ident: bytes, msg: Message) -> None:
        assert self.client_sock is not None
        try:
            self.client_sock.send_multipart([ident, msg.encode()], zmq.NOBLOCK)
        except zmq.ZMQError:
            self._client_subs.pop(ident, None)  # client went away

    def _route_request(self, msg: Message) -> None:
        target = msg.nodeid
        if target == NODEID_ANY or target == self.rank:
            handler = self.services.lookup(msg.topic)
            if handler is not None:
                self.services.dispatch(handler, Request(msg, self._send_response))
                return
            if target == self.rank or self.rank == 0:
                self._send_response(msg.error(ENOSYS, f"{msg.topic}: no such service on rank {self.rank}"))
                return
            hop = self.parent_rank
        elif target < 0 or (target >= self.size and self.rank == 0):
            self._send_response(msg.error(EHOSTUNREACH, f"rank {target} is not in this instance (size {self.size})"))
            return
        elif target >= self.size:
            hop = self.parent_rank  # a rank the lead registered later (a burst): only the lead knows the way
        else:
            hop = self.topology.next_hop(self.rank, target)
        assert self.overlay is not None
        if hop == self.parent_rank:
            if not self.joined or not self.overlay.send_parent(msg):
                self._send_response(msg.error(EHOSTUNREACH, f"rank {self.rank} is not connected to its parent"))
        elif hop not in self.children or not self.overlay.send_child(hop, msg):
            self._send_response(msg.error(EHOSTUNREACH, f"rank {target} is unreachable: rank {hop} is down"))

    def _send_response(self, msg: Message) -> None:
        if not msg.route:
            return
        hop = msg.route.pop()
        assert self.overlay is not None
        if hop == "l":
            callback = self._pending.pop(msg.matchtag, None)
            if callback is not None:
                callback(msg.decoded())
        elif hop == "p":
            self.overlay.send_parent(msg)
        elif hop.startswith("r:"):
            self.overlay.send_child(int(hop[2:]), msg)
        elif hop.startswith("c:"):
            self._send_client(bytes.fromhex(hop[2:]), msg)

    def _distribute_event(self, msg: Message) -> None:
        """Deliver an event here and pass it down the tree (rank 0 stamps the sequence number)."""
        if self.rank == 0:
            self._event_seq += 1
            msg.seq = self._event_seq
        for prefix, callback in list(self._subscribers):
            if msg.topic.startswith(prefix):
                callback(msg)
        for ident, prefixes in list(self._client_subs.items()):
            if any(msg.topic.startswith(p) for p in prefixes):
                self._send_client(ident, msg)
        assert self.overlay is not None
        for rank in list(self.children):
            self.overlay.send_child(rank, msg)
