"""The broker's place in the tree: the link to its parent, its children, membership and quorum, heartbeats.

:class:`TreeLink` is a part of the broker, not a mixin: it alone owns the links to its connected children, whether
it has joined its parent, the instance's being online (and what waits for it) and the membership changes not yet
published. It reads the broker through :class:`TreeHost` and changes the broker's life only through the lifecycle
part (`set_state`, `set_exit_code`, `shutdown`, `finish`, `start_command`); tests/broker/test_broker_parts.py
checks it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

from common import idset

from .lifecycle import Lifecycle
from .membership import DOWN, LOST, UP
from .options import BrokerError
from .overlay import OverlayError
from .payloads import ControlPayload, HelloPayload
from .protocol import (
    CONTROL,
    EVENT,
    REQUEST,
    RESPONSE,
    Message,
    control,
)
from .tree_host import TreeHost

MEMBERSHIP_EVENT_DELAY = 0.05
MEMBERSHIP_EVENT_DELAY_PER_BROKER = 0.0005
"""Each membership.update is delivered to every broker, so one costs the instance CPU in proportion to its size,
and a start-up publishes one per delay while joins trickle in: at a fixed 50 ms that is O(N^2). Measured with
`flux start --test-size=512 true` on the 2-core machine: user CPU 11.9 -> 6.8-7.5 s at kary:2 and 7.5 -> 5.1-6.1 s
at kary:32; online 10.9-15.3 -> 7.0-7.3 s and 8.2-8.7 -> 5.1-5.6 s (bench/bench_scale.py). Quorum and online
are checked on each change, not on these events; of the brokers' own modules only rank 0's job manager and saver
subscribe to them."""


JOINING_EVENT_DELAY_FACTOR = 4
"""Rank 0 gathers changes this much longer before the instance is online: one event per N x 0.5 ms, each waking
all N brokers, costs a start-up a fixed share of the machine at any size (about 0.3 of the 2 cores here at 1,024
brokers). Nothing waits on them then: online is decided on each change, and what is pending is published at it."""


def membership_event_delay(size: int, online: bool = True) -> float:
    """How long rank 0 gathers membership changes into one event: 50 ms, or N x 0.5 ms past 100 brokers; four
    times that while the instance is not yet online."""
    delay = max(MEMBERSHIP_EVENT_DELAY, size * MEMBERSHIP_EVENT_DELAY_PER_BROKER)
    return delay if online else delay * JOINING_EVENT_DELAY_FACTOR


DISCONNECT_GRACE_BEATS = 1.0
"""How many heartbeat intervals a closed connection may stay closed before its peer is lost. A broker that dies
(crash, kill -9, pod deleted) closes its connections, and its peers see that at once: a child's ROUTER refuses a
heartbeat to it (ROUTER_MANDATORY), a parent's monitor reports the close. Silence alone, which a live broker starved
of CPU in a multiplexed pod also keeps, is given heartbeat.timeout (30 s, flux-core's tbon.torpid_max). The grace
lets a TCP connection that drops and reconnects (zmq retries within 100 ms) keep its peer."""


@dataclass
class ChildLink:
    """A connected child: which incarnation of its broker, when it last spoke, since when it is unreachable."""

    uuid: str
    last_seen: float
    unreachable_since: float | None = None


class TreeLink:
    """Parent link, children, membership, heartbeats (see the module docstring)."""

    def __init__(self, broker: TreeHost, life: Lifecycle) -> None:
        self._b = broker
        self._life = life
        self._links: dict[int, ChildLink] = {}
        """rank -> link, for the children connected now."""
        self._joined = broker.rank == 0
        self._parent_last_seen = 0.0
        self._parent_closed_at: float | None = None  # when the parent connection closed, until it is made again
        self._join_started = 0.0
        self._join_warned = 0.0
        self._online = False
        self._online_hooks: list[Callable[[], None]] = []
        self._membership_dirty: set[int] = set()
        self._membership_lost: set[int] = set()  # ranks lost since the last membership event

    @property
    def joined(self) -> bool:
        """Whether this broker has joined its parent (rank 0 always has)."""
        return self._joined

    @property
    def online(self) -> bool:
        """Whether the instance's quorum has joined (rank 0)."""
        return self._online

    def connected_children(self) -> list[int]:
        """The child ranks whose brokers are linked to this one now, in the order they joined."""
        return list(self._links)

    def has_child(self, rank: int) -> bool:
        return rank in self._links

    def on_online(self, callback: Callable[[], None]) -> None:
        """Run `callback` on rank 0 once the quorum has joined (immediately if it already has)."""
        if self._online:
            callback()
        else:
            self._online_hooks.append(callback)

    def connect_parent(self) -> None:
        assert self._b.overlay is not None
        uri = self._b.config.connect_uri(self._b.parent_rank)
        assert uri is not None
        try:
            self._b.overlay.connect_parent(uri, self._b.connect_timeout)
        except OverlayError as exc:
            raise BrokerError(str(exc)) from None
        assert self._b.overlay.parent_sock is not None
        self._b.loop.add_reader(self._b.overlay.parent_sock, self._on_parent)
        if self._b.overlay.parent_monitor is not None:
            self._b.loop.add_reader(self._b.overlay.parent_monitor, self._on_parent_connection)
        self._parent_closed_at = None
        self._parent_last_seen = self._join_started = time.monotonic()
        self._join_warned = 0.0
        self._send_hello()

    def _send_hello(self) -> None:
        assert self._b.overlay is not None
        payload: ControlPayload = {
            "rank": self._b.rank,
            "uuid": self._b.uuid,
            "hostname": self._b.hostname,
            "size": self._b.size,
            "pid": os.getpid(),
            "resources": self._b.resources,
            "subtree": self._b.membership.snapshot(self._b.subtree),
        }
        self._b.overlay.send_parent(control("overlay.hello", payload, sender=self._b.rank))

    def _on_parent_connection(self) -> None:
        assert self._b.overlay is not None
        for made in self._b.overlay.parent_connection_events():
            if made:
                self._parent_closed_at = None
            elif self._parent_closed_at is None:
                self._parent_closed_at = time.monotonic()

    def shutdown_children(self, reason: str) -> bool:
        """Tell every connected child to shut down (lifecycle.Lifecycle's shutdown); whether there was one."""
        assert self._b.overlay is not None
        children = self.connected_children()
        for rank in children:
            self._b.overlay.send_child(rank, control("overlay.shutdown", {"reason": reason}, sender=self._b.rank))
        return bool(children)

    def leave_parent(self) -> None:
        """At the end: say goodbye to the parent and close the link (rank > 0)."""
        assert self._b.overlay is not None
        if self._b.rank > 0 and self._b.overlay.parent_sock is not None:
            self._b.overlay.send_parent(control("overlay.goodbye", sender=self._b.rank))
            self._b.loop.remove_reader(self._b.overlay.parent_sock)
            self.stop_watching_parent()
            self._b.overlay.close_parent(linger_ms=500)

    def stop_watching_parent(self) -> None:
        """Before the parent socket closes: its monitor goes with it."""
        assert self._b.overlay is not None
        if self._b.overlay.parent_monitor is not None:
            self._b.loop.remove_reader(self._b.overlay.parent_monitor)

    def _on_parent(self) -> None:
        assert self._b.overlay is not None
        if self._b.overlay.parent_sock is None:
            return
        for msg in self._b.overlay.recv_parent():
            self._parent_last_seen = time.monotonic()
            if msg.type == CONTROL:
                self._parent_control(msg)
            elif msg.type == REQUEST:
                msg.route.append("p")
                self._b.router.route_request(msg)
            elif msg.type == RESPONSE:
                self._b.router.send_response(msg)
            elif msg.type == EVENT:
                self._b.router.distribute_event(msg)

    def _parent_control(self, msg: Message) -> None:
        if msg.topic == "overlay.welcome":
            if not self._joined:
                self._joined = True
                if self._life.state == "join":
                    self._life.set_state("run")
                self._b.debug(f"joined parent rank {self._b.parent_rank}")
                if self._b.subtree:  # children may have joined us before we joined our parent
                    snapshot = self._b.membership.snapshot(self._b.subtree)
                    assert self._b.overlay is not None
                    self._b.overlay.send_parent(control("overlay.update", {"ranks": snapshot}, sender=self._b.rank))
        elif msg.topic == "overlay.deny":
            self._b.log(f"parent rank {self._b.parent_rank} refused us: {msg.payload.get('reason')}")
            self._life.set_exit_code(1)
            self._life.finish()
        elif msg.topic == "overlay.reset":
            if self._joined and not self._b.rejoin:
                self._parent_lost()  # our parent restarted: the instance we joined is gone
            else:
                self._joined = False
                self._send_hello()
        elif msg.topic == "overlay.shutdown":
            self._life.shutdown(str(msg.payload.get("reason", "instance shutdown")))

    def _parent_lost(self) -> None:
        if self._life.state == "shutdown":
            self._life.finish()
            return
        if not self._b.rejoin:
            self._b.log(f"lost connection to parent rank {self._b.parent_rank}; exiting")
            self._life.set_exit_code(1)
            self._life.shutdown("parent lost")
            return
        self._b.log(f"lost connection to parent rank {self._b.parent_rank}; waiting to rejoin")
        assert self._b.overlay is not None
        if self._b.overlay.parent_sock is not None:
            self._b.loop.remove_reader(self._b.overlay.parent_sock)
        self.stop_watching_parent()
        self._b.overlay.close_parent()
        self._joined = False
        self._life.set_state("join")
        self.connect_parent()

    def on_children(self) -> None:
        assert self._b.overlay is not None
        for rank, msg in self._b.overlay.recv_children():
            if msg.type == CONTROL:
                self._child_control(rank, msg)
                continue
            if rank not in self._links:
                self._b.overlay.send_child(rank, control("overlay.reset", sender=self._b.rank))
                continue
            self._links[rank].last_seen = time.monotonic()
            if msg.type == REQUEST:
                msg.route.append(f"r:{rank}")
                self._b.router.route_request(msg)
            elif msg.type == RESPONSE:
                self._b.router.send_response(msg)
            elif msg.type == EVENT:
                if self._b.rank == 0:
                    self._b.router.distribute_event(msg)
                else:
                    self._b.overlay.send_parent(msg)

    def _child_control(self, rank: int, msg: Message) -> None:
        assert self._b.overlay is not None
        topic = msg.topic
        if topic == "overlay.hello":
            self._child_hello(rank, cast(HelloPayload, msg.payload))  # JSON from the child: checked as read
            return
        if rank not in self._links:
            if topic not in ("overlay.goodbye",):
                self._b.overlay.send_child(rank, control("overlay.reset", sender=self._b.rank))
            return
        self._links[rank].last_seen = time.monotonic()
        if topic == "overlay.update":
            allowed = set(self._b.topology.descendants(rank))
            ranks = msg.payload.get("ranks", {})
            update = {k: v for k, v in ranks.items() if k.isdigit() and int(k) in allowed}
            self._changed(self._b.membership.merge(update))
        elif topic == "client.disconnect":  # a client below went away: its route as its requests have here
            self._b.router.client_gone([*msg.route, f"r:{rank}"])
        elif topic == "overlay.goodbye":
            del self._links[rank]
            self._mark_subtree(rank, DOWN)
            self._life.maybe_finish_shutdown()

    def release_rank(self, rank: int, reason: str) -> bool:
        """Let a rank go (a released burst's): tell its broker to stop, forget the link, mark it down and drop
        its resources. True when that changed its state (for the membership event)."""
        assert self._b.overlay is not None
        if rank in self._links:
            self._b.overlay.send_child(rank, control("overlay.shutdown", {"reason": reason}))
            del self._links[rank]
        changed = self._b.membership.state(rank) == UP and self._b.membership.set(rank, DOWN)
        self._b.membership.drop_resources(rank)
        return changed

    def _child_hello(self, rank: int, payload: HelloPayload) -> None:
        assert self._b.overlay is not None
        reason = None
        if rank >= self._b.size:
            reason = f"rank {rank} ({payload.get('hostname')!r}) is not a registered host (size {self._b.size})"
        elif rank not in self._b.child_ranks:
            reason = f"rank {rank} is not a child of rank {self._b.rank} in topology {self._b.topology.name}"
        elif payload.get("size") != self._b.bootstrap_size and not self._b.bursts.prefix_of(rank):
            # the configured hosts, not the size bursts grew the lead to: a pod's config never names a burst
            reason = f"size mismatch: parent has {self._b.bootstrap_size} ranks, child has {payload.get('size')}"
        elif payload.get("hostname") != self._b.config.hostnames[rank]:
            reason = f"rank {rank} should be {self._b.config.hostnames[rank]!r}, not {payload.get('hostname')!r}"
        elif self._life.state == "shutdown":
            reason = "instance is shutting down"
        if reason is not None:
            self._b.log(f"denied hello from rank {rank}: {reason}")
            self._b.overlay.send_child(rank, control("overlay.deny", {"reason": reason}, sender=self._b.rank))
            return
        child_uuid = str(payload.get("uuid", ""))
        previous = self._links.get(rank)
        self._links[rank] = ChildLink(child_uuid, time.monotonic())
        changed: list[int] = []
        if previous is not None and previous.uuid != child_uuid:
            # a restarted broker: its previous incarnation (and whatever ran there) is lost, even if it is back
            # before anyone noticed; said now, so the lost state is not merged away by the up state below
            self._mark_subtree(rank, LOST)
        resources = payload.get("resources")
        reported = resources if isinstance(resources, dict) else None  # JSON from the child
        if self._b.membership.set(rank, UP, resources=reported, uuid=child_uuid):
            changed.append(rank)
        subtree = payload.get("subtree", {})
        allowed = set(self._b.topology.descendants(rank))
        if isinstance(subtree, dict):
            changed += self._b.membership.merge({k: v for k, v in subtree.items() if k.isdigit() and int(k) in allowed})
        self._b.overlay.send_child(rank, control("overlay.welcome", {"rank": self._b.rank}, sender=self._b.rank))
        self._b.debug(f"child rank {rank} joined")
        self._changed(sorted(set(changed)))

    def _mark_subtree(self, rank: int, state: str, notify: bool = True) -> list[int]:
        """Mark a child and everything below it (whose only path was through it) as down or lost."""
        changed: list[int] = []
        for r in [rank, *self._b.topology.descendants(rank)]:
            if self._b.membership.state(r) == UP and self._b.membership.set(r, state):
                changed.append(r)
        if notify:
            self._changed(changed)
        return changed

    def _changed(self, ranks: list[int]) -> None:
        """Propagate membership changes toward rank 0; on rank 0 check quorum and tell subscribers."""
        if not ranks:
            return
        if self._b.rank == 0:
            if not self._membership_dirty:  # coalesce a burst of joins into one event (start-up is O(N))
                self._b.loop.call_later(membership_event_delay(self._b.size, self._online), self._publish_membership)
            self._membership_dirty.update(ranks)
            self._membership_lost.update(r for r in ranks if self._b.membership.state(r) == LOST)
            self.check_quorum()
        elif self._joined:
            assert self._b.overlay is not None
            update = control("overlay.update", {"ranks": self._b.membership.snapshot(ranks)}, sender=self._b.rank)
            self._b.overlay.send_parent(update)

    def _publish_membership(self) -> None:
        """The states since the last event; a rank lost and back meanwhile (a restart) is said lost first."""
        if not self._membership_dirty:  # published when the instance came online, before this timer
            return
        back = sorted(r for r in self._membership_lost if self._b.membership.state(r) != LOST)
        self._membership_lost.clear()
        if back:
            self._b.debug(f"membership: {back} lost and back")
            self._b.publish("membership.update", {"ranks": {str(r): LOST for r in back}})
        states = {str(r): self._b.membership.state(r) for r in sorted(self._membership_dirty)}
        self._membership_dirty.clear()
        self._b.debug(f"membership: {states}")
        self._b.publish("membership.update", {"ranks": states})

    def check_quorum(self) -> None:
        if self._online or self._life.state == "shutdown" or not self._b.quorum.reached(self._b.membership):
            return
        self._online = True
        self._life.set_state("run")
        self._b.debug(f"quorum reached: instance online ({len(self._b.membership.in_state(UP))}/{self._b.size} up)")
        self._publish_membership()  # the joins gathered so far, now rather than after the joining delay
        self._b.publish("broker.online", {"up": idset.encode(self._b.membership.in_state(UP))})
        for hook in self._online_hooks:
            hook()
        self._online_hooks.clear()
        self._life.start_command()

    def heartbeat(self) -> None:
        """Every interval: tell children and parent we are alive (or retry hello while joining)."""
        assert self._b.overlay is not None
        beat = control("overlay.hb", sender=self._b.rank)
        now = time.monotonic()
        for rank, child in list(self._links.items()):
            if self._b.overlay.send_child(rank, beat):
                self._links[rank].unreachable_since = None
            elif child.unreachable_since is None:
                self._links[rank].unreachable_since = now
            elif now - child.unreachable_since >= self._disconnect_grace:
                self._child_lost(rank, "its connection closed")
        if self._b.rank > 0 and self._b.overlay.parent_sock is not None:
            if self._joined:
                self._b.overlay.send_parent(beat)
            else:
                self._send_hello()
                waited = time.monotonic() - self._join_started
                if waited > self._join_warned + self._b.connect_timeout:
                    self._join_warned = waited
                    uri = self._b.config.connect_uri(self._b.parent_rank)
                    self._b.log(
                        f"not joined to parent rank {self._b.parent_rank} at {uri} after {waited:.0f}s; retrying",
                    )

    @property
    def _disconnect_grace(self) -> float:
        return DISCONNECT_GRACE_BEATS * self._b.hb_interval

    def _child_lost(self, rank: int, why: str) -> None:
        self._b.log(f"child rank {rank} ({self._b.config.hostnames[rank]}) lost: {why}")
        del self._links[rank]
        self._mark_subtree(rank, LOST)
        self._life.maybe_finish_shutdown()

    def check_liveness(self) -> None:
        """Often (the interval, or timeout/10 if less): a peer silent for longer than heartbeat.timeout is lost,
        and so is a parent whose connection has stayed closed for the disconnect grace."""
        assert self._b.overlay is not None
        now = time.monotonic()
        for rank, child in list(self._links.items()):
            if now - child.last_seen > self._b.hb_timeout:
                self._child_lost(rank, "no heartbeat")
        if self._b.rank == 0 or not self._joined or self._b.overlay.parent_sock is None:
            return
        closed = self._parent_closed_at is not None and now - self._parent_closed_at >= self._disconnect_grace
        if closed or now - self._parent_last_seen > self._b.hb_timeout:
            self._parent_lost()
