"""Ranks past the bootstrap host list: brokers of a burst join the lead as new ranks and leave again.

Flux pre-registers every host an instance may ever have (its `[bootstrap] hosts`), so no instance grows past
maxSize. The built-in lead also takes hosts registered at run time by the burst service (`overlay.burst-register`):
all under one burst's own prefix (never a prefix of a bootstrap host, so a burst cannot pose as a pod), appended
after every existing rank, each a child of rank 0. Their brokers still need the instance's CURVE key to connect
at all (the overlay's ZAP handler refuses any other), then join with the hostname registered for their rank and
report their resources like any follower. `overlay.burst-release` lets them go: their ranks are forgotten (the
trailing ones removed, so the instance's size comes back down once every burst has gone). The service also
reports its own state here (`overlay.burst-service`, see burst_service.py), so a dead service is seen.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from .bootstrap import HostEntry
from .broker_core import BrokerCore, _log
from .burst_service import DEFAULT_STALE_AFTER, REPORTED, ServiceReport, service_view
from .membership import DOWN, UP, RankInfo
from .protocol import EINVAL, control
from .service import Request, ServiceError
from .topology import Topology


class BurstRanks(BrokerCore):
    """The lead's run-time ranks (see the module docstring)."""

    def _register_burst_services(self) -> None:
        if self.rank == 0:
            self.register("overlay.burst-register", self._svc_burst_register)
            self.register("overlay.burst-release", self._svc_burst_release)
            self.register("overlay.burst-service", self._svc_burst_service)

    def _svc_burst_service(self, req: Request) -> dict[str, Any]:
        """The burst service reports its state (burst_service.py): running, or failed/stopped and why."""
        state = req.get("state", str)
        if state not in REPORTED:
            raise ServiceError(EINVAL, f"burst-service: state {state!r} is not one of {', '.join(REPORTED)}")
        stale_after = req.payload.get("stale_after", DEFAULT_STALE_AFTER)
        if isinstance(stale_after, bool) or not isinstance(stale_after, (int, float)) or not 0 < stale_after < 1e9:
            raise ServiceError(EINVAL, f"burst-service: stale_after {stale_after!r} must be a positive number")
        reason = req.get("reason", str, required=False, default="")
        pid = req.get("pid", int, required=False, default=0)
        self.burst_service = ServiceReport(state, reason, pid, time.monotonic(), float(stale_after))
        return {}

    def burst_service_view(self) -> dict[str, Any]:
        """The burst service's state now (burst_service.service_view): what status and pending jobs show."""
        return service_view(self.burst_service, time.monotonic())

    def _svc_burst_register(self, req: Request) -> dict[str, Any]:
        prefix = req.get("prefix", str)
        hosts = req.get("hosts", list)
        ranks = self.register_burst(prefix, [str(h) for h in hosts])
        return {"ranks": ranks, "size": self.size, "hostnames": self.config.hostnames}

    def _svc_burst_release(self, req: Request) -> dict[str, Any]:
        return {"released": self.release_burst(req.get("prefix", str)), "size": self.size}

    def register_burst(self, prefix: str, hosts: list[str]) -> list[int]:
        """Append hosts of one burst as ranks (idempotent for hosts already registered under this prefix)."""
        if not prefix or not hosts:
            raise ServiceError(EINVAL, "burst-register: a prefix and at least one host are required")
        known = self.config.hostnames
        for host in hosts:
            if not host.startswith(prefix) or host == prefix:
                raise ServiceError(EINVAL, f"burst-register: host {host!r} is not under the burst's prefix {prefix!r}")
        pre_registered = [h for r, h in enumerate(known) if r not in self.burst_ranks]
        clash = next((h for h in pre_registered if h.startswith(prefix)), None)
        if clash is not None:
            raise ServiceError(EINVAL, f"burst-register: prefix {prefix!r} also names bootstrap host {clash!r}")
        new: list[str] = []
        for host in hosts:
            if host in known:
                rank = known.index(host)
                if self.burst_ranks.get(rank) != prefix:
                    raise ServiceError(EINVAL, f"burst-register: host {host!r} is already rank {rank}")
            elif host not in new:
                new.append(host)
        first = self.size
        if new:
            self._grow([HostEntry(host=h) for h in new])
            for rank in range(first, self.size):
                self.burst_ranks[rank] = prefix
            _log(self.rank, f"burst {prefix}: registered {', '.join(new)} as ranks {first}-{self.size - 1}")
        return [self.config.hostnames.index(h) for h in hosts]

    def release_burst(self, prefix: str) -> list[int]:
        """Forget a burst's ranks: tell their brokers to stop, mark them down, drop trailing ones."""
        ranks = sorted(r for r, p in self.burst_ranks.items() if p == prefix)
        assert self.overlay is not None
        changed: list[int] = []
        for rank in ranks:
            if rank in self.children:
                self.overlay.send_child(rank, control("overlay.shutdown", {"reason": "burst released"}))
                del self.children[rank]
            if self.membership.state(rank) == UP and self.membership.set(rank, DOWN):
                changed.append(rank)
            self.membership.ranks[rank].resources = None
            del self.burst_ranks[rank]
        keep = self.size
        while keep > self.bootstrap_size and keep - 1 not in self.burst_ranks:
            keep -= 1  # every rank past the bootstrap hosts is a burst's: trailing released ones go
        if keep < self.size:
            self._resize_to(self.config.hosts[:keep])
        if changed:
            self.publish("membership.update", {"ranks": {str(r): DOWN for r in changed}})
        if ranks:
            _log(self.rank, f"burst {prefix}: released ranks {ranks[0]}-{ranks[-1]} (size now {self.size})")
        return ranks

    def _grow(self, entries: list[HostEntry]) -> None:
        first = self.size
        self._resize_to(self.config.hosts + tuple(entries))
        self.membership.ranks += [RankInfo(rank, e.host) for rank, e in enumerate(entries, start=first)]

    def _resize_to(self, hosts: tuple[HostEntry, ...]) -> None:
        """New host list: config, topology (new ranks hang off rank 0), membership, size."""
        size = len(hosts)
        parents = list(self.topology.parents[:size]) + [0] * max(0, size - self.topology.size)
        self.config = dataclasses.replace(self.config, hosts=hosts)
        self.topology = Topology(tuple(parents), name=self.topology.name)
        del self.membership.ranks[size:]
        self.size = size
        self.child_ranks = self.topology.children(self.rank)
        self.subtree = self.topology.descendants(self.rank)
        self.attrs.set("size", self.size)
        self.attrs.set("hostlist", self.config.hostlist())
