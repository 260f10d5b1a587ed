"""One broker process: joins the tree overlay, tracks membership, routes RPCs and events, runs the initial program.

Everything happens on one thread in a small poll loop (loop.py). The broker composes its parts, each owning its
state (tests/broker/test_broker_parts.py checks it): lifecycle.py (run directory, signals, the initial program,
shutdown, close hooks), tree_link.py (the parent link, children, membership and quorum, heartbeats), routing.py
(local clients, request/response/event routing), burst_ranks.py (ranks bursts add) and builtin_services.py.
Modules such as the job manager plug in through the narrow port (port.py): registering services, sending RPCs,
publishing and subscribing to events.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import socket
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

import zmq

from common import idset

from .attributes import AttrError, Attributes
from .bootstrap import BootstrapConfig, BootstrapError, HostEntry
from .builtin_services import BuiltinServices
from .burst_ranks import BurstRanks
from .curve_cert import CurveCertError, load_zcert
from .errors import InputError
from .lifecycle import Lifecycle
from .loop import Loop
from .membership import UP, Membership, Quorum, QuorumError
from .options import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_HEARTBEAT_INTERVAL,
    DEFAULT_HEARTBEAT_TIMEOUT,
    BrokerError,
    BrokerOptions,
    StartRefused,
    log_line,
)
from .overlay import Overlay, OverlayError
from .payloads import ResourceReport, ServiceView
from .port import EventCallback, Module, ModulePort, ResponseCallback
from .protocol import EVENT, Message
from .refused import EXIT_REFUSED, refusal_line
from .resources import local_resources
from .routing import Router
from .service import Handler, ServiceRegistry
from .topology import Topology, TopologyError, build
from .tree_link import TreeLink

__all__ = [
    "Broker",
    "BrokerError",
    "BrokerOptions",
    "EventCallback",
    "Module",
    "ModulePort",
    "ResponseCallback",
    "StartRefused",
    "run_broker",
]


def uuid4_hex() -> str:
    """uuid.uuid4().hex from os.urandom directly: the same random UUID (version 4, RFC 4122 variant) without the
    uuid module's classes, whose pages every broker of a 2,048-broker test instance would copy to make one."""
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40
    raw[8] = (raw[8] & 0x3F) | 0x80
    return raw.hex()


def instance_topology(config: BootstrapConfig, attrs: Attributes) -> Topology:
    """The tree a broker with these settings builds. As flux-core ranks them: -Stbon.topo, then -Stbon.fanout,
    then the config's [tbon] topo. Raises TopologyError, AttrError (and BootstrapError for a bad parent key)."""
    fanout = attrs.integer("tbon.fanout", None)
    topo = attrs.get("tbon.topo") or (config.topo if fanout is None else None)
    return build(config.size, topo, fanout, config.explicit_parents())


class Broker:
    """A broker of the instance described by the bootstrap config, at the rank its hostname selects."""

    def __init__(self, options: BrokerOptions) -> None:
        self.options = options
        self.config = options.config
        self.attrs = options.attrs
        self.verbose = options.verbose
        hostname = options.hostname or self.attrs.get("hostname") or os.environ.get("FLUX_FAKE_HOSTNAME")
        self.hostname: str = hostname or socket.gethostname()
        try:
            self.rank = 0 if self.config.singleton else self.config.rank_of(self.hostname)
            self.size = self.config.size
            self.topology: Topology = instance_topology(self.config, self.attrs)
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
        self.uuid = uuid4_hex()
        self.starttime = time.time()
        self.loop = Loop()
        self.services = ServiceRegistry()
        self.membership = Membership(self.config.hostnames)
        self.ctx: zmq.Context[zmq.Socket[bytes]] | None = None
        self.overlay: Overlay | None = None
        self.client_sock: zmq.Socket[bytes] | None = None
        self.resources: ResourceReport = {}
        self.life = Lifecycle(self.rank, self.loop, self.attrs, options.command, options.verbose, options.handle_sigint)
        self.bursts = BurstRanks(self)
        self.router = Router(self)
        self.tree = TreeLink(self, self.life)
        self.life.attach(self.tree)

    # ------------------------------------------------------------------ the port (port.py)
    @property
    def hostnames(self) -> list[str]:
        return self.config.hostnames

    @property
    def rundir(self) -> str:
        return self.life.rundir

    @property
    def local_uri(self) -> str:
        return self.life.local_uri

    @property
    def state(self) -> str:
        return self.life.state

    @property
    def exit_code(self) -> int:
        return self.life.exit_code

    @property
    def online(self) -> bool:
        return self.tree.online

    @property
    def bootstrap_size(self) -> int:
        """The instance's configured hosts: its size without the ranks bursts add at run time (burst_ranks.py)."""
        return self.options.config.size

    def burst_view(self) -> ServiceView:
        return self.bursts.service_view()

    def register(self, topic: str, handler: Handler) -> None:
        """Serve `topic` on this broker (e.g. "job-manager.submit", or "job-manager.*" for a whole service)."""
        self.services.register(topic, handler)

    def rpc(
        self,
        topic: str,
        payload: Mapping[str, Any] | None,  # open: any service's request payload (each has its TypedDict)
        nodeid: int,
        callback: ResponseCallback,
        timeout: float | None = None,
    ) -> int:
        """Send a request from this broker to any rank (or NODEID_ANY); callback gets the response Message.

        With a timeout, a request still unanswered after `timeout` seconds (e.g. its target was lost on
        the way) gets an ETIMEDOUT error response instead, and a late real response is dropped.
        """
        return self.router.rpc(topic, payload, nodeid, callback, timeout)

    def publish(self, topic: str, payload: dict[str, Any] | None = None) -> None:  # open: any event's payload
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
        self.life.on_close(callback)

    def log(self, text: str) -> None:
        """A line on stderr, as flux-broker[rank] (always; debug only with -v)."""
        log_line(self.rank, text)

    def debug(self, text: str) -> None:
        """A line on stderr with -v only."""
        if self.verbose:
            log_line(self.rank, text)

    # ------------------------------------------------------------------ what the parts ask
    def set_hosts(self, hosts: tuple[HostEntry, ...]) -> None:
        """The instance's hosts become `hosts` (a burst's appended, released trailing ones dropped): config,
        topology (new ranks hang off rank 0), membership, size."""
        size = len(hosts)
        parents = list(self.topology.parents[:size]) + [0] * max(0, size - self.topology.size)
        self.config = dataclasses.replace(self.config, hosts=hosts)
        self.topology = Topology(tuple(parents), name=self.topology.name)
        self.membership.resize(self.config.hostnames)
        self.size = size
        self.child_ranks = self.topology.children(self.rank)
        self.subtree = self.topology.descendants(self.rank)
        self.attrs.set("size", self.size)
        self.attrs.set("hostlist", self.config.hostlist())

    def release_rank(self, rank: int, reason: str) -> bool:
        """Let a rank go (a released burst's); True when its state changed (tree_link.TreeLink.release_rank)."""
        return self.tree.release_rank(rank, reason)

    def shutdown(self, reason: str) -> None:
        """Shut this broker and its subtree down (lifecycle.Lifecycle.shutdown)."""
        self.life.shutdown(reason)

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
        self.resources = self._local_resources()
        self.life.init_rundir()
        if not self.attrs.get("statedir"):
            self.attrs.set("statedir", f"{self.rundir}/state")
        self.ctx = zmq.Context()
        self.overlay = Overlay(self.ctx, self.rank, cert)
        self._bind_clients()
        self._bind_children(self.overlay)
        if self.rank > 0:
            uri = self.config.connect_uri(self.parent_rank)
            if uri is None:
                raise BrokerError(
                    f"{self.config.source}: no connect URI for parent rank {self.parent_rank} "
                    "(set [bootstrap] default_connect or hosts[].connect)"
                )
            self.attrs.set("tbon.parent-endpoint", uri)
        self._set_attributes()
        BuiltinServices(self, self.life)
        self.bursts.register_services()
        for module in self.options.modules:
            self._load(module)
        self.membership.set(self.rank, UP, resources=self.resources, uuid=self.uuid)
        self._start_reading(self.overlay)
        self.life.install_signals()
        if self.rank == 0:
            self.tree.check_quorum()

    def _local_resources(self) -> ResourceReport:
        measured = self.options.resources
        if measured is not None:
            resources: ResourceReport = {**measured, "rank": self.rank, "hostname": self.hostname}
        else:
            resources = local_resources(self.rank, self.hostname)
        cores = self.attrs.get("resource.cores")
        if cores:  # a sub-instance owns only the cores its parent allocated to it
            try:
                ids = idset.decode(cores)
            except idset.IdsetError as exc:
                raise BrokerError(f"attribute resource.cores: {exc}") from None
            resources["cores"], resources["ncores"] = idset.encode(ids), len(ids)
        return resources

    def _bind_clients(self) -> None:
        assert self.ctx is not None
        self.client_sock = self.ctx.socket(zmq.ROUTER)
        self.client_sock.setsockopt(zmq.LINGER, 0)
        self.client_sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
        # No send limit: a client that pipelines thousands of requests before reading (`flux submit --cc`) must get
        # every answer. At zmq's default of 1,000 queued messages ROUTER_MANDATORY refuses the send with EAGAIN and
        # the answer (a job id whose job was accepted) was lost. flux-core's local connector queues without limit.
        self.client_sock.setsockopt(zmq.SNDHWM, 0)
        try:
            self.client_sock.bind(f"ipc://{self.rundir}/local")
        except zmq.ZMQError as exc:
            raise BrokerError(f"cannot bind local client socket {self.rundir}/local: {exc.strerror}") from None

    def _bind_children(self, overlay: Overlay) -> None:
        if not self.child_ranks:
            return
        uri = self.config.bind_uri(self.rank)
        if uri is None:
            raise BrokerError(
                f"{self.config.source}: rank {self.rank} ({self.hostname}) has children but no bind URI "
                "(set [bootstrap] default_bind or hosts[].bind)"
            )
        try:
            bound = overlay.bind_children(uri)
        except OverlayError as exc:
            raise BrokerError(str(exc)) from None
        self.attrs.set("tbon.endpoint", bound)

    def _load(self, module: Module) -> None:
        try:
            module(self)
        except (OSError, InputError) as exc:  # a path it cannot use, a setting it refuses: one clear line
            name = getattr(module, "__name__", "module").replace("_", "-")
            detail = f"{exc.filename}: {exc.strerror}" if isinstance(exc, OSError) and exc.filename else exc
            raise BrokerError(f"{name}: {detail}") from None

    def _start_reading(self, overlay: Overlay) -> None:
        assert self.client_sock is not None
        self.loop.add_reader(self.client_sock, self.router.on_client)
        if overlay.child_sock is not None:
            self.loop.add_reader(overlay.child_sock, self.tree.on_children)
        if overlay.zap_sock is not None:
            self.loop.add_reader(overlay.zap_sock, overlay.handle_zap)
        if self.rank > 0:
            self.tree.connect_parent()
        self.loop.call_every(self.hb_interval, self.tree.heartbeat)
        self.loop.call_every(max(0.01, min(self.hb_interval, self.hb_timeout / 10)), self.tree.check_liveness)

    def _set_attributes(self) -> None:
        quorum = self.quorum.count if not self.quorum.ranks else idset.encode(self.quorum.ranks)
        for name, value in (
            ("rank", self.rank),
            ("size", self.size),
            ("hostlist", self.config.hostlist()),
            ("hostname", self.hostname),
            ("local-uri", self.local_uri),
            ("rundir", self.rundir),
            ("tbon.topo", self.topology.name),
            ("tbon.parent", self.parent_rank),
            ("tbon.level", self.topology.depth(self.rank)),
            ("broker.quorum", quorum),
            ("broker.pid", os.getpid()),
            ("broker.starttime", f"{self.starttime:.3f}"),
        ):
            self.attrs.set(name, value)
        if "instance-level" not in self.attrs:
            self.attrs.set("instance-level", 0)
        self.attrs.set("version", "0.88.0-miniclusters")

    # ------------------------------------------------------------------ running and closing
    def run(self) -> int:
        """Run until the broker exits; return its exit code."""
        try:
            self.loop.run()
        finally:
            self.close()
        return self.life.exit_code

    def close(self) -> None:
        self.life.run_close_hooks()
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
        self.life.release()


def run_broker(options: BrokerOptions) -> int:
    """Start a broker and run it to completion; start-up problems print one clear line and return 1."""
    try:
        broker = Broker(options)
        broker.setup()
    except StartRefused as exc:
        print(refusal_line(str(exc)), file=sys.stderr, flush=True)
        return EXIT_REFUSED
    except BrokerError as exc:
        print(f"flux-broker: {exc}", file=sys.stderr, flush=True)
        return 1
    return broker.run()
