"""One broker process: joins the tree overlay, tracks membership, routes RPCs and events, runs the initial program.

Everything happens on one thread in a small poll loop (loop.py); modules such as the job manager plug in by
registering services (`Broker.register`), sending RPCs (`Broker.rpc`) and publishing/subscribing to events.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid as uuidlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import zmq

from . import idset
from .attributes import AttrError, Attributes
from .bootstrap import BootstrapConfig, BootstrapError
from .curve_cert import CurveCertError, CurveCertificate, load_zcert
from .loop import Loop, Timer
from .membership import DOWN, LOST, UP, Membership, Quorum, QuorumError
from .overlay import Overlay, OverlayError
from .protocol import (
    CONTROL,
    EHOSTUNREACH,
    EINVAL,
    ENOENT,
    ENOSYS,
    ETIMEDOUT,
    EVENT,
    NODEID_ANY,
    REQUEST,
    RESPONSE,
    Message,
    ProtocolError,
    control,
)
from .resources import build_R, local_resources
from .service import Handler, Request, ServiceError, ServiceRegistry
from .topology import Topology, TopologyError, build

DEFAULT_HEARTBEAT_INTERVAL = 1.0
DEFAULT_HEARTBEAT_TIMEOUT = 5.0
DEFAULT_CONNECT_TIMEOUT = 30.0  # Flux's tbon.connect_timeout default
SHUTDOWN_GRACE = 5.0
MEMBERSHIP_EVENT_DELAY = 0.05

ResponseCallback = Callable[[Message], None]
EventCallback = Callable[[Message], None]
Module = Callable[["Broker"], None]


class BrokerError(RuntimeError):
    """A start-up problem; the message says what is wrong (config field, file, address)."""


@dataclass
class _Child:
    uuid: str
    last_seen: float


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


class Broker:
    """A broker of the instance described by the bootstrap config, at the rank its hostname selects."""

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
        self.children: dict[int, _Child] = {}
        self.joined = self.rank == 0
        self.parent_last_seen = 0.0
        self._join_started = 0.0
        self._join_warned = 0.0
        self.online = False
        self._matchtag = 0
        self._pending: dict[int, ResponseCallback] = {}
        self._event_seq = 0
        self._subscribers: list[tuple[str, EventCallback]] = []
        self._client_subs: dict[bytes, set[str]] = {}
        self._online_hooks: list[Callable[[], None]] = []
        self._close_hooks: list[Callable[[], None]] = []
        self._membership_dirty: set[int] = set()
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

    # ------------------------------------------------------------------ public API for modules
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
        self._matchtag += 1
        tag = self._matchtag
        self._pending[tag] = callback
        if timeout is not None:

            def expire() -> None:
                if tag in self._pending:
                    reason = f"{topic}: no response from rank {nodeid} within {timeout}s"
                    error = Message(RESPONSE, topic, matchtag=tag, route=["l"], errnum=ETIMEDOUT, errstr=reason)
                    self._send_response(error)

            self.loop.call_later(timeout, expire)
        msg = Message(REQUEST, topic, payload or {}, nodeid=nodeid, matchtag=tag, route=["l"], sender=self.rank)
        self._route_request(msg)
        return tag

    def publish(self, topic: str, payload: dict[str, Any] | None = None) -> None:
        """Publish an event to every broker of the instance (sequenced by rank 0)."""
        msg = Message(EVENT, topic, payload or {}, sender=self.rank)
        if self.rank == 0:
            self._distribute_event(msg)
        else:
            assert self.overlay is not None
            self.overlay.send_parent(msg)

    def subscribe(self, prefix: str, callback: EventCallback) -> None:
        """Call `callback` for every event whose topic starts with `prefix`."""
        self._subscribers.append((prefix, callback))

    def on_online(self, callback: Callable[[], None]) -> None:
        """Run `callback` on rank 0 once the quorum has joined (immediately if it already has)."""
        if self.online:
            callback()
        else:
            self._online_hooks.append(callback)

    def on_close(self, callback: Callable[[], None]) -> None:
        """Run `callback` when the broker closes (modules stop their processes, flush their files)."""
        self._close_hooks.append(callback)

    @property
    def local_uri(self) -> str:
        return f"local://{self.rundir}/local"

    # ------------------------------------------------------------------ start-up
    def setup(self) -> None:
        """Load the certificate, bind and connect sockets. Raises BrokerError; cleans up after itself."""
        try:
            self._setup()
        except BrokerError:
            self.close()
            raise

    def _setup(self) -> None:
        cert = self.options.cert
        if self.size > 1 and cert is None:
            assert self.config.curve_cert is not None
            try:
                cert = load_zcert(self.config.curve_cert)
            except CurveCertError as exc:
                raise BrokerError(f"curve certificate: {exc}") from None
        self.resources = local_resources(self.rank, self.hostname or "")
        cores = self.attrs.get("resource.cores")
        if cores:  # a sub-instance owns only the cores its parent allocated to it
            try:
                ids = idset.decode(cores)
            except idset.IdsetError as exc:
                raise BrokerError(f"attribute resource.cores: {exc}") from None
            self.resources.update(cores=idset.encode(ids), ncores=len(ids))
        self._init_rundir()
        if not self.attrs.get("statedir"):
            self.attrs.set("statedir", f"{self.rundir}/state")
        self.ctx = zmq.Context()
        self.overlay = Overlay(self.ctx, self.rank, cert)
        self.client_sock = self.ctx.socket(zmq.ROUTER)
        self.client_sock.setsockopt(zmq.LINGER, 0)
        self.client_sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
        try:
            self.client_sock.bind(f"ipc://{self.rundir}/local")
        except zmq.ZMQError as exc:
            raise BrokerError(f"cannot bind local client socket {self.rundir}/local: {exc.strerror}") from None
        if self.child_ranks:
            uri = self.config.bind_uri(self.rank)
            if uri is None:
                raise BrokerError(
                    f"{self.config.source}: rank {self.rank} ({self.hostname}) has children but no bind URI "
                    "(set [bootstrap] default_bind or hosts[].bind)"
                )
            try:
                bound = self.overlay.bind_children(uri)
            except OverlayError as exc:
                raise BrokerError(str(exc)) from None
            self.attrs.set("tbon.endpoint", bound)
        if self.rank > 0:
            uri = self.config.connect_uri(self.parent_rank)
            if uri is None:
                raise BrokerError(
                    f"{self.config.source}: no connect URI for parent rank {self.parent_rank} "
                    "(set [bootstrap] default_connect or hosts[].connect)"
                )
            self.attrs.set("tbon.parent-endpoint", uri)
        self._set_attributes()
        self._register_builtins()
        for module in self.options.modules:
            module(self)
        self.membership.set(self.rank, UP, resources=self.resources, uuid=self.uuid)
        self.loop.add_reader(self.client_sock, self._on_client)
        if self.overlay.child_sock is not None:
            self.loop.add_reader(self.overlay.child_sock, self._on_children)
        if self.overlay.zap_sock is not None:
            self.loop.add_reader(self.overlay.zap_sock, self.overlay.handle_zap)
        if self.rank > 0:
            self._connect_parent()
        self.loop.call_every(self.hb_interval, self._heartbeat)
        self.loop.call_every(max(0.01, self.hb_timeout / 10), self._check_liveness)
        self._install_signals()
        if self.rank == 0:
            self._check_quorum()

    def _init_rundir(self) -> None:
        rundir = self.attrs.get("rundir")
        if rundir:
            Path(rundir).mkdir(parents=True, exist_ok=True, mode=0o700)
            self.rundir = rundir
        else:
            self.rundir = tempfile.mkdtemp(prefix="flux-")
            self._created_rundir = True

    def _set_attributes(self) -> None:
        self.attrs.set("rank", self.rank)
        self.attrs.set("size", self.size)
        self.attrs.set("hostlist", self.config.hostlist())
        self.attrs.set("hostname", self.hostname)
        self.attrs.set("local-uri", self.local_uri)
        self.attrs.set("rundir", self.rundir)
        self.attrs.set("tbon.topo", self.topology.name)
        self.attrs.set("tbon.parent", self.parent_rank)
        self.attrs.set("tbon.level", self.topology.depth(self.rank))
        self.attrs.set("broker.quorum", self.quorum.count if not self.quorum.ranks else idset.encode(self.quorum.ranks))
        self.attrs.set("broker.pid", os.getpid())
        self.attrs.set("broker.starttime", f"{self.starttime:.3f}")
        if "instance-level" not in self.attrs:
            self.attrs.set("instance-level", 0)
        self.attrs.set("version", "0.88.0-miniclusters")

    def _install_signals(self) -> None:
        self._signal_r, self._signal_w = os.pipe()
        os.set_blocking(self._signal_w, False)
        os.set_blocking(self._signal_r, False)
        signal.set_wakeup_fd(self._signal_w, warn_on_full_buffer=False)
        signal.signal(signal.SIGTERM, self._on_signal)
        if self.options.handle_sigint:
            signal.signal(signal.SIGINT, self._on_signal)
        self.loop.add_reader(self._signal_r, self._drain_signals)

    def _on_signal(self, signum: int, _frame: object) -> None:
        self._pending_signals.append(signum)

    def _drain_signals(self) -> None:
        with contextlib.suppress(BlockingIOError):
            os.read(self._signal_r, 512)
        while self._pending_signals:
            signum = self._pending_signals.pop()
            self._debug(f"signal {signum}: shutting down")
            self.shutdown(f"signal {signum}")

    # ------------------------------------------------------------------ running
    def run(self) -> int:
        """Run until the broker exits; return its exit code."""
        try:
            self.loop.run()
        finally:
            self.close()
        return self.exit_code

    def close(self) -> None:
        hooks, self._close_hooks = self._close_hooks, []
        for hook in hooks:
            try:
                hook()
            except Exception as exc:  # one module's failure must not stop the others' clean-up
                _log(self.rank, f"close hook failed: {exc!r}")
        if self._command is not None and self._command.poll() is None:
            self._signal_command(signal.SIGKILL)
        if self.overlay is not None:
            self.overlay.close()
        if self.client_sock is not None:
            self.client_sock.close(0)
            self.client_sock = None
            with contextlib.suppress(OSError):
                os.unlink(f"{self.rundir}/local")
        if self.ctx is not None:
            self.ctx.term()
            self.ctx = None
        if self._signal_w >= 0:
            signal.set_wakeup_fd(-1)
            os.close(self._signal_w)
            os.close(self._signal_r)
            self._signal_w = self._signal_r = -1
        if self._created_rundir and self.rundir:
            shutil.rmtree(self.rundir, ignore_errors=True)
            self._created_rundir = False

    def _debug(self, text: str) -> None:
        if self.verbose:
            _log(self.rank, text)

    # ------------------------------------------------------------------ parent link
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
                self._route_request(msg)
            elif msg.type == RESPONSE:
                self._send_response(msg)
            elif msg.type == EVENT:
                self._distribute_event(msg)

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

    # ------------------------------------------------------------------ children
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
                self._route_request(msg)
            elif msg.type == RESPONSE:
                self._send_response(msg)
            elif msg.type == EVENT:
                if self.rank == 0:
                    self._distribute_event(msg)
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

    def _child_hello(self, rank: int, payload: dict[str, Any]) -> None:
        assert self.overlay is not None
        reason = None
        if rank not in self.child_ranks:
            reason = f"rank {rank} is not a child of rank {self.rank} in topology {self.topology.name}"
        elif payload.get("size") != self.size:
            reason = f"size mismatch: parent has {self.size} ranks, child has {payload.get('size')}"
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
            changed += self._mark_subtree(rank, LOST, notify=False)
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
            self._check_quorum()
        elif self.joined:
            assert self.overlay is not None
            update = control("overlay.update", {"ranks": self.membership.snapshot(ranks)}, sender=self.rank)
            self.overlay.send_parent(update)

    def _publish_membership(self) -> None:
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

    # ------------------------------------------------------------------ heartbeats
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

    # ------------------------------------------------------------------ clients
    def _on_client(self) -> None:
        assert self.client_sock is not None
        while True:
            try:
                frames = self.client_sock.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
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
                self._route_request(msg)
            elif msg.type == CONTROL and msg.topic == "client.disconnect":
                self._client_subs.pop(ident, None)

    def _send_client(self, ident: bytes, msg: Message) -> None:
        assert self.client_sock is not None
        try:
            self.client_sock.send_multipart([ident, msg.encode()], zmq.NOBLOCK)
        except zmq.ZMQError:
            self._client_subs.pop(ident, None)  # client went away

    # ------------------------------------------------------------------ routing
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
        elif not 0 <= target < self.size:
            self._send_response(msg.error(EHOSTUNREACH, f"rank {target} is not in this instance (size {self.size})"))
            return
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
                callback(msg)
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

    # ------------------------------------------------------------------ initial program and shutdown
    def _start_command(self) -> None:
        env = dict(os.environ, FLUX_URI=self.local_uri)
        bindir = os.path.dirname(sys.executable)  # where the `flux` console script is installed
        if shutil.which("flux", path=env.get("PATH")) is None and os.path.exists(os.path.join(bindir, "flux")):
            env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
        try:
            # its own process group, so shutdown reaches everything the program started
            self._command = subprocess.Popen(self.options.command, env=env, process_group=0)
        except OSError as exc:
            _log(self.rank, f"{self.options.command[0]}: {exc.strerror or exc}")
            self.exit_code = 127 if isinstance(exc, FileNotFoundError) else 126
            self.shutdown("initial program failed to start")
            return
        self._command_fd = os.pidfd_open(self._command.pid)
        self.loop.add_reader(self._command_fd, self._on_command_exit)

    def _on_command_exit(self) -> None:
        assert self._command is not None and self._command_fd is not None
        code = self._command.wait()
        self.loop.remove_reader(self._command_fd)
        os.close(self._command_fd)
        self._command_fd = None
        self.exit_code = 128 - code if code < 0 else code
        self._debug(f"initial program exited with {self.exit_code}")
        self._command = None
        if self.state == "shutdown":
            self._shutdown_children("instance shutdown")
        else:
            self.shutdown("initial program exited")

    def shutdown(self, reason: str) -> None:
        """Shut this broker and its subtree down: stop the initial program, tell children, say goodbye."""
        if self.state == "shutdown":
            return
        self.state = "shutdown"
        self._debug(f"shutdown: {reason}")
        if self._command is not None and self._command.poll() is None:
            self._signal_command(signal.SIGTERM)
            self.loop.call_later(SHUTDOWN_GRACE, self._kill_command)
            return  # _on_command_exit continues with the children
        self._shutdown_children(reason)

    def _signal_command(self, signum: int) -> None:
        if self._command is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._command.pid, signum)

    def _kill_command(self) -> None:
        if self._command is not None and self._command.poll() is None:
            self._signal_command(signal.SIGKILL)

    def _shutdown_children(self, reason: str) -> None:
        assert self.overlay is not None
        for rank in self.children:
            self.overlay.send_child(rank, control("overlay.shutdown", {"reason": reason}, sender=self.rank))
        if not self.children:
            self._finish()
        else:
            self._shutdown_timer = self.loop.call_later(SHUTDOWN_GRACE, self._finish)

    def _maybe_finish_shutdown(self) -> None:
        if self.state == "shutdown" and not self.children and self._command is None:
            self._finish()

    def _finish(self) -> None:
        if self._finishing:
            return
        self._finishing = True
        assert self.overlay is not None
        if self.rank > 0 and self.overlay.parent_sock is not None:
            self.overlay.parent_sock.setsockopt(zmq.LINGER, 500)
            self.overlay.send_parent(control("overlay.goodbye", sender=self.rank))
            self.loop.remove_reader(self.overlay.parent_sock)
            self.overlay.parent_sock.close()
            self.overlay.parent_sock = None
        self.loop.stop()

    # ------------------------------------------------------------------ built-in services
    def _register_builtins(self) -> None:
        self.register("broker.ping", self._svc_ping)
        self.register("broker.info", self._svc_info)
        self.register("broker.uptime", self._svc_uptime)
        self.register("attr.get", self._svc_attr_get)
        self.register("attr.list", lambda req: {"names": [name for name, _ in self.attrs.items()]})
        self.register("event.subscribe", self._svc_subscribe)
        self.register("event.unsubscribe", self._svc_unsubscribe)
        self.register("event.publish", self._svc_publish)
        if self.rank == 0:
            self.register("overlay.status", self._svc_overlay_status)
            self.register("resource.status", self._svc_resource_status)
            self.register("resource.R", lambda req: build_R(self._reports(), self.starttime))
            self.register("broker.shutdown", self._svc_shutdown)

    def _svc_ping(self, req: Request) -> dict[str, Any]:
        origin = req.sender if 0 <= req.sender < self.size else self.rank
        return {
            "rank": self.rank,
            "hostname": self.hostname,
            "pid": os.getpid(),
            "route": self.topology.path(origin, self.rank),
            "pad": req.payload.get("pad", ""),
        }

    def _svc_info(self, req: Request) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "size": self.size,
            "hostname": self.hostname,
            "parent": self.parent_rank,
            "children": self.child_ranks,
            "connected_children": sorted(self.children),
            "state": self.state,
            "joined": self.joined,
            "uuid": self.uuid,
            "pid": os.getpid(),
            "resources": self.resources,
        }

    def _svc_uptime(self, req: Request) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "state": self.state,
            "starttime": self.starttime,
            "uptime": time.time() - self.starttime,
            "size": self.size,
            "depth": 0,
        }

    def _svc_attr_get(self, req: Request) -> dict[str, Any]:
        name = req.get("name", str)
        value = self.attrs.get(name)
        if value is None:
            raise ServiceError(ENOENT, f"attribute {name!r} is not set")
        return {"name": name, "value": value}

    def _svc_subscribe(self, req: Request) -> dict[str, Any]:
        topic = req.get("topic", str)
        if req.client_id is None:
            raise ServiceError(EINVAL, "event.subscribe: only local clients may subscribe")
        self._client_subs.setdefault(bytes.fromhex(req.client_id), set()).add(topic)
        return {}

    def _svc_unsubscribe(self, req: Request) -> dict[str, Any]:
        topic = req.get("topic", str)
        if req.client_id is not None:
            self._client_subs.get(bytes.fromhex(req.client_id), set()).discard(topic)
        return {}

    def _svc_publish(self, req: Request) -> dict[str, Any]:
        topic = req.get("topic", str)
        payload = req.get("payload", dict, required=False, default={})
        self.publish(topic, payload)
        return {}

    def _svc_shutdown(self, req: Request) -> dict[str, Any]:
        req.respond({})
        self.loop.call_later(0.05, lambda: self.shutdown("flux shutdown"))
        return {}

    def _reports(self) -> dict[int, dict[str, Any]]:
        return {info.rank: info.resources for info in self.membership.ranks if info.resources}

    def _svc_overlay_status(self, req: Request) -> dict[str, Any]:
        return {
            "size": self.size,
            "topology": self.topology.name,
            "parents": list(self.topology.parents),
            "state": self.state,
            "ranks": [
                {
                    "rank": info.rank,
                    "hostname": info.hostname,
                    "state": info.state,
                    "status": self.membership.subtree_status(self.topology, info.rank),
                    "parent": self.topology.parent(info.rank),
                    "since": info.since,
                }
                for info in self.membership.ranks
            ],
        }

    def _svc_resource_status(self, req: Request) -> dict[str, Any]:
        return {
            "R": build_R(self._reports(), self.starttime),
            "up": idset.encode(self.membership.in_state(UP)),
            "down": idset.encode(r for r in range(self.size) if self.membership.state(r) != UP),
            "hostnames": self.config.hostnames,
            "reports": {str(rank): report for rank, report in self._reports().items()},
        }


def run_broker(options: BrokerOptions) -> int:
    """Start a broker and run it to completion; start-up problems print one clear line and return 1."""
    try:
        broker = Broker(options)
        broker.setup()
    except BrokerError as exc:
        print(f"flux-broker: {exc}", file=sys.stderr, flush=True)
        return 1
    return broker.run()
