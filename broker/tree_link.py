"""The broker's place in the tree: the link to its parent, its children, membership and quorum, heartbeats."""

from __future__ import annotations

import os
import time
from typing import Any

from . import idset
from .broker_core import MEMBERSHIP_EVENT_DELAY, BrokerCore, BrokerError, _Child, _log
from .membership import DOWN, LOST, UP
from .overlay import OverlayError
from .protocol import (
    CONTROL,
    EVENT,
    REQUEST,
    RESPONSE,
    Message,
    control,
)


class TreeLink(BrokerCore):
    """Parent link, children, membership, heartbeats."""

    def _connect_parent(self) -> None:
        assert self.overlay is not None
        uri = self.config.connect_uri(self.parent_rank)
        assert uri is not None
        try:
            self.overlay.connect_parent(uri, self.connect_timeout)
        except OverlayError as exc:
            raise BrokerError(str(exc)) from None
        assert self.overlay.parent_sock is not None
        self.loop.add_reader(self.overlay.parent_sock, self._on_parent)
        self.parent_last_seen = self._join_started = time.monotonic()
        self._join_warned = 0.0
        self._send_hello()

    def _send_hello(self) -> None:
        assert self.overlay is not None
        payload = {
            "rank": self.rank,
            "uuid": self.uuid,
            "hostname": self.hostname,
            "size": self.size,
            "pid": os.getpid(),
            "resources": self.resources,
            "subtree": self.membership.snapshot(self.subtree),
        }
        self.overlay.send_parent(control("overlay.hello", payload, sender=self.rank))

    def _on_parent(self) -> None:
        assert self.overlay is not None
        if self.overlay.parent_sock is None:
            return
        for msg in self.overlay.recv_parent():
            self.parent_last_seen = time.monotonic()
            if msg.type == CONTROL:
                self._parent_control(msg)
            elif msg.type == REQUEST:
                msg.route.append("p")
                self.router.route_request(msg)
            elif msg.type == RESPONSE:
                self.router.send_response(msg)
            elif msg.type == EVENT:
                self.router.distribute_event(msg)

    def _parent_control(self, msg: Message) -> None:
        if msg.topic == "overlay.welcome":
            if not self.joined:
                self.joined = True
                if self.state == "join":
                    self.state = "run"
                self._debug(f"joined parent rank {self.parent_rank}")
                if self.subtree:  # children may have joined us before we joined our parent
                    snapshot = self.membership.snapshot(self.subtree)
                    assert self.overlay is not None
                    self.overlay.send_parent(control("overlay.update", {"ranks": snapshot}, sender=self.rank))
        elif msg.topic == "overlay.deny":
            _log(self.rank, f"parent rank {self.parent_rank} refused us: {msg.payload.get('reason')}")
            self.exit_code = 1
            self._finish()
        elif msg.topic == "overlay.reset":
            if self.joined and not self.rejoin:
                self._parent_lost()  # our parent restarted: the instance we joined is gone
            else:
                self.joined = False
                self._send_hello()
        elif msg.topic == "overlay.shutdown":
            self.shutdown(str(msg.payload.get("reason", "instance shutdown")))

    def _parent_lost(self) -> None:
        if self.state == "shutdown":
            self._finish()
            return
        if not self.rejoin:
            _log(self.rank, f"lost connection to parent rank {self.parent_rank}; exiting")
            self.exit_code = 1
            self.shutdown("parent lost")
            return
        _log(self.rank, f"lost connection to parent rank {self.parent_rank}; waiting to rejoin")
        assert self.overlay is not None
        if self.overlay.parent_sock is not None:
            self.loop.remove_reader(self.overlay.parent_sock)
        self.overlay.close_parent()
        self.joined = False
        self.state = "join"
        self._connect_parent()

    def _on_children(self) -> None:
        assert self.overlay is not None
        for rank, msg in self.overlay.recv_children():
            if msg.type == CONTROL:
                self._child_control(rank, msg)
                continue
            child = self.children.get(rank)
            if child is None:
                self.overlay.send_child(rank, control("overlay.reset", sender=self.rank))
                continue
            child.last_seen = time.monotonic()
            if msg.type == REQUEST:
                msg.route.append(f"r:{rank}")
                self.router.route_request(msg)
            elif msg.type == RESPONSE:
                self.router.send_response(msg)
            elif msg.type == EVENT:
                if self.rank == 0:
                    self.router.distribute_event(msg)
                else:
                    self.overlay.send_parent(msg)

    def _child_control(self, rank: int, msg: Message) -> None:
        assert self.overlay is not None
        topic = msg.topic
        if topic == "overlay.hello":
            self._child_hello(rank, msg.payload)
            return
        child = self.children.get(rank)
        if child is None:
            if topic not in ("overlay.goodbye",):
                self.overlay.send_child(rank, control("overlay.reset", sender=self.rank))
            return
        child.last_seen = time.monotonic()
        if topic == "overlay.update":
            allowed = set(self.topology.descendants(rank))
            ranks = msg.payload.get("ranks", {})
            update = {k: v for k, v in ranks.items() if k.isdigit() and int(k) in allowed}
            self._changed(self.membership.merge(update))
        elif topic == "overlay.goodbye":
            del self.children[rank]
            self._mark_subtree(rank, DOWN)
            self._maybe_finish_shutdown()

    def release_rank(self, rank: int, reason: str) -> bool:
        """Let a rank go (a released burst's): tell its broker to stop, forget the link, mark it down and drop
        its resources. True when that changed its state (for the membership event)."""
        assert self.overlay is not None
        if rank in self.children:
            self.overlay.send_child(rank, control("overlay.shutdown", {"reason": reason}))
            del self.children[rank]
        changed = self.membership.state(rank) == UP and self.membership.set(rank, DOWN)
        self.membership.ranks[rank].resources = None
        return changed

    def _child_hello(self, rank: int, payload: dict[str, Any]) -> None:
        assert self.overlay is not None
        reason = None
        if rank >= self.size:
            reason = f"rank {rank} ({payload.get('hostname')!r}) is not a registered host (size {self.size})"
        elif rank not in self.child_ranks:
            reason = f"rank {rank} is not a child of rank {self.rank} in topology {self.topology.name}"
        elif payload.get("size") != self.bootstrap_size and not self.bursts.prefix_of(rank):
            # the configured hosts, not the size bursts grew the lead to: a pod's config never names a burst
            reason = f"size mismatch: parent has {self.bootstrap_size} ranks, child has {payload.get('size')}"
        elif payload.get("hostname") != self.config.hostnames[rank]:
            reason = f"rank {rank} should be {self.config.hostnames[rank]!r}, not {payload.get('hostname')!r}"
        elif self.state == "shutdown":
            reason = "instance is shutting down"
        if reason is not None:
            _log(self.rank, f"denied hello from rank {rank}: {reason}")
            self.overlay.send_child(rank, control("overlay.deny", {"reason": reason}, sender=self.rank))
            return
        child_uuid = str(payload.get("uuid", ""))
        previous = self.children.get(rank)
        self.children[rank] = _Child(child_uuid, time.monotonic())
        changed: list[int] = []
        if previous is not None and previous.uuid != child_uuid:
            # a restarted broker: its previous incarnation (and whatever ran there) is lost, even if it is back
            # before anyone noticed; said now, so the lost state is not merged away by the up state below
            self._mark_subtree(rank, LOST)
        resources = payload.get("resources")
        if self.membership.set(rank, UP, resources=resources if isinstance(resources, dict) else None, uuid=child_uuid):
            changed.append(rank)
        subtree = payload.get("subtree", {})
        allowed = set(self.topology.descendants(rank))
        if isinstance(subtree, dict):
            changed += self.membership.merge({k: v for k, v in subtree.items() if k.isdigit() and int(k) in allowed})
        self.overlay.send_child(rank, control("overlay.welcome", {"rank": self.rank}, sender=self.rank))
        self._debug(f"child rank {rank} joined")
        self._changed(sorted(set(changed)))

    def _mark_subtree(self, rank: int, state: str, notify: bool = True) -> list[int]:
        """Mark a child and everything below it (whose only path was through it) as down or lost."""
        changed: list[int] = []
        for r in [rank, *self.topology.descendants(rank)]:
            if self.membership.state(r) == UP and self.membership.set(r, state):
                changed.append(r)
        if notify:
            self._changed(changed)
        return changed

    def _changed(self, ranks: list[int]) -> None:
        """Propagate membership changes toward rank 0; on rank 0 check quorum and tell subscribers."""
        if not ranks:
            return
        if self.rank == 0:
            if not self._membership_dirty:  # coalesce a burst of joins into one event (start-up is O(N))
                self.loop.call_later(MEMBERSHIP_EVENT_DELAY, self._publish_membership)
            self._membership_dirty.update(ranks)
            self._membership_lost.update(r for r in ranks if self.membership.state(r) == LOST)
            self._check_quorum()
        elif self.joined:
            assert self.overlay is not None
            update = control("overlay.update", {"ranks": self.membership.snapshot(ranks)}, sender=self.rank)
            self.overlay.send_parent(update)

    def _publish_membership(self) -> None:
        """The states since the last event; a rank lost and back meanwhile (a restart) is said lost first."""
        back = sorted(r for r in self._membership_lost if self.membership.state(r) != LOST)
        self._membership_lost.clear()
        if back:
            self._debug(f"membership: {back} lost and back")
            self.publish("membership.update", {"ranks": {str(r): LOST for r in back}})
        states = {str(r): self.membership.state(r) for r in sorted(self._membership_dirty)}
        self._membership_dirty.clear()
        self._debug(f"membership: {states}")
        self.publish("membership.update", {"ranks": states})

    def _check_quorum(self) -> None:
        if self.online or self.state == "shutdown" or not self.quorum.reached(self.membership):
            return
        self.online = True
        self.state = "run"
        self._debug(f"quorum reached: instance online ({len(self.membership.in_state(UP))}/{self.size} up)")
        self.publish("broker.online", {"up": idset.encode(self.membership.in_state(UP))})
        for hook in self._online_hooks:
            hook()
        self._online_hooks.clear()
        if self.options.command and not self.attrs.get("broker.rc2_none"):  # flux-core's "no initial program"
            self._start_command()

    def _heartbeat(self) -> None:
        """Every interval: tell children and parent we are alive (or retry hello while joining)."""
        assert self.overlay is not None
        beat = control("overlay.hb", sender=self.rank)
        for rank in list(self.children):
            self.overlay.send_child(rank, beat)
        if self.rank > 0 and self.overlay.parent_sock is not None:
            if self.joined:
                self.overlay.send_parent(beat)
            else:
                self._send_hello()
                waited = time.monotonic() - self._join_started
                if waited > self._join_warned + self.connect_timeout:
                    self._join_warned = waited
                    uri = self.config.connect_uri(self.parent_rank)
                    _log(
                        self.rank,
                        f"not joined to parent rank {self.parent_rank} at {uri} after {waited:.0f}s; retrying",
                    )

    def _check_liveness(self) -> None:
        """Often (timeout/10): a peer silent for longer than heartbeat.timeout is lost."""
        assert self.overlay is not None
        now = time.monotonic()
        for rank, child in list(self.children.items()):
            if now - child.last_seen > self.hb_timeout:
                _log(self.rank, f"child rank {rank} ({self.config.hostnames[rank]}) lost: no heartbeat")
                del self.children[rank]
                self._mark_subtree(rank, LOST)
                self._maybe_finish_shutdown()
        parent_silent = now - self.parent_last_seen > self.hb_timeout
        if self.rank > 0 and self.joined and self.overlay.parent_sock is not None and parent_silent:
            self._parent_lost()
