"""The broker's built-in services: broker.*, attr.* and event.* on every rank; overlay and resource status, R
and shutdown on the lead. They read the broker through :class:`ServicesHost` and change it only through the
parts' methods (a subscription through the router, shutdown through the lifecycle).
"""

from __future__ import annotations

import os
import time
from typing import Protocol

from common import idset

from .attributes import Attributes
from .bootstrap import BootstrapConfig
from .burst_ranks import BurstRanks
from .cpu_report import cpu_report
from .lifecycle import Lifecycle
from .loop import Loop
from .membership import UP, Membership
from .payloads import (
    AttrValue,
    Empty,
    InfoReply,
    OverlayStatus,
    PingReply,
    ResourceReport,
    ResourceStatus,
    UptimeReply,
)
from .port import Publisher
from .protocol import EINVAL, ENOENT
from .resources import build_R
from .routing import Router
from .service import Handler, Request, ServiceError
from .topology import Topology
from .tree_link import TreeLink


class ServicesHost(Publisher, Protocol):
    """What the built-in services read of the broker (broker.Broker provides it)."""

    rank: int
    size: int
    hostname: str
    uuid: str
    starttime: float
    parent_rank: int
    child_ranks: list[int]
    attrs: Attributes
    config: BootstrapConfig
    topology: Topology
    membership: Membership
    resources: ResourceReport
    loop: Loop
    tree: TreeLink
    router: Router
    bursts: BurstRanks

    def register(self, topic: str, handler: Handler) -> None: ...


class BuiltinServices:
    """Registers itself on the broker it is given."""

    def __init__(self, broker: ServicesHost, life: Lifecycle) -> None:
        self.b = broker
        self._life = life
        self.b.register("broker.ping", self._svc_ping)
        self.b.register("broker.info", self._svc_info)
        self.b.register("broker.uptime", self._svc_uptime)
        self.b.register("attr.get", self._svc_attr_get)
        self.b.register("attr.list", lambda req: {"names": [name for name, _ in self.b.attrs.items()]})
        self.b.register("event.subscribe", self._svc_subscribe)
        self.b.register("event.unsubscribe", self._svc_unsubscribe)
        self.b.register("event.publish", self._svc_publish)
        self.b.register("resource.cpu", lambda req: {"rank": self.b.rank, "hostname": self.b.hostname, **cpu_report()})
        if self.b.rank == 0:
            self.b.register("overlay.status", self._svc_overlay_status)
            self.b.register("resource.status", self._svc_resource_status)
            self.b.register("resource.R", lambda req: build_R(self._reports(), self.b.starttime))
            self.b.register("broker.shutdown", self._svc_shutdown)

    def _svc_ping(self, req: Request) -> PingReply:
        origin = req.sender if 0 <= req.sender < self.b.size else self.b.rank
        return {
            "rank": self.b.rank,
            "hostname": self.b.hostname,
            "pid": os.getpid(),
            "route": self.b.topology.path(origin, self.b.rank),
            "pad": req.payload.get("pad", ""),
        }

    def _svc_info(self, req: Request) -> InfoReply:
        return {
            "rank": self.b.rank,
            "size": self.b.size,
            "hostname": self.b.hostname,
            "parent": self.b.parent_rank,
            "children": self.b.child_ranks,
            "connected_children": sorted(self.b.tree.connected_children()),
            "state": self._life.state,
            "joined": self.b.tree.joined,
            "uuid": self.b.uuid,
            "pid": os.getpid(),
            "resources": self.b.resources,
        }

    def _svc_uptime(self, req: Request) -> UptimeReply:
        return {
            "rank": self.b.rank,
            "state": self._life.state,
            "starttime": self.b.starttime,
            "uptime": time.time() - self.b.starttime,
            "size": self.b.size,
            "depth": 0,
        }

    def _svc_attr_get(self, req: Request) -> AttrValue:
        name = req.get("name", str)
        value = self.b.attrs.get(name)
        if value is None:
            raise ServiceError(ENOENT, f"attribute {name!r} is not set")
        return {"name": name, "value": value}

    def _svc_subscribe(self, req: Request) -> Empty:
        topic = req.get("topic", str)
        if req.client_id is None:
            raise ServiceError(EINVAL, "event.subscribe: only local clients may subscribe")
        self.b.router.client_subscribe(bytes.fromhex(req.client_id), topic)
        return {}

    def _svc_unsubscribe(self, req: Request) -> Empty:
        topic = req.get("topic", str)
        if req.client_id is not None:
            self.b.router.client_unsubscribe(bytes.fromhex(req.client_id), topic)
        return {}

    def _svc_publish(self, req: Request) -> Empty:
        topic = req.get("topic", str)
        payload = req.get("payload", dict, required=False, default={})
        self.b.publish(topic, payload)
        return {}

    def _svc_shutdown(self, req: Request) -> Empty:
        req.respond({})
        self.b.loop.call_later(0.05, lambda: self._life.shutdown("flux shutdown"))
        return {}

    def _reports(self) -> dict[int, ResourceReport]:
        return {info.rank: info.resources for info in self.b.membership.ranks if info.resources}

    def _svc_overlay_status(self, req: Request) -> OverlayStatus:
        return {
            "size": self.b.size,
            "topology": self.b.topology.name,
            "parents": list(self.b.topology.parents),
            "state": self._life.state,
            "ranks": [
                {
                    "rank": info.rank,
                    "hostname": info.hostname,
                    "state": info.state,
                    "status": self.b.membership.subtree_status(self.b.topology, info.rank),
                    "parent": self.b.topology.parent(info.rank),
                    "since": info.since,
                    "burst": self.b.bursts.prefix_of(info.rank).rstrip("-"),
                }
                for info in self.b.membership.ranks
            ],
            "burst_service": self.b.bursts.service_view(),
        }

    def _svc_resource_status(self, req: Request) -> ResourceStatus:
        return {
            "R": build_R(self._reports(), self.b.starttime),
            "up": idset.encode(self.b.membership.in_state(UP)),
            "down": idset.encode(r for r in range(self.b.size) if self.b.membership.state(r) != UP),
            "hostnames": self.b.config.hostnames,
            "reports": {str(rank): report for rank, report in self._reports().items()},
        }
