"""Ranks past the bootstrap host list: brokers of a burst join the lead as new ranks and leave again.

Flux pre-registers every host an instance may ever have (its `[bootstrap] hosts`), so no instance grows past
maxSize. The built-in lead also takes hosts registered at run time by the burst service (`overlay.burst-register`):
all under one burst's own prefix (never a prefix of a bootstrap host, so a burst cannot pose as a pod), appended
after every existing rank, each a child of rank 0. Their brokers still need the instance's CURVE key to connect
at all (the overlay's ZAP handler refuses any other), then join with the hostname registered for their rank and
report their resources like any follower. `overlay.burst-release` lets them go: their ranks are forgotten (the
trailing ones removed, so the instance's size comes back down once every burst has gone). The service also
reports its own state here (`overlay.burst-service`, see burst_service.py), so a dead service is seen.

:class:`BurstRanks` is a part of the broker, not a mixin: it alone owns which ranks are a burst's and the burst
service's last report, and it changes the instance's hosts and a rank's link only through the broker's
`set_hosts` and `release_rank`.
"""

from __future__ import annotations

import time
from typing import Protocol

from .bootstrap import BootstrapConfig, HostEntry
from .burst_service import DEFAULT_STALE_AFTER, REPORTED, ServiceReport, service_view
from .membership import DOWN
from .payloads import BurstRegistered, BurstReleased, Empty, ServiceView
from .port import Publisher
from .protocol import EINVAL
from .service import Handler, Request, ServiceError


class BurstHost(Publisher, Protocol):
    """What the burst part reads and asks of the broker (broker.Broker provides it)."""

    rank: int
    size: int
    config: BootstrapConfig

    @property
    def bootstrap_size(self) -> int: ...

    def register(self, topic: str, handler: Handler) -> None: ...

    def set_hosts(self, hosts: tuple[HostEntry, ...]) -> None: ...

    def release_rank(self, rank: int, reason: str) -> bool: ...

    def log(self, text: str) -> None: ...


class BurstRanks:
    """The lead's run-time ranks (see the module docstring)."""

    def __init__(self, broker: BurstHost) -> None:
        self._b = broker
        self._prefixes: dict[int, str] = {}
        """rank -> burst prefix, for ranks registered at run time."""
        self._service: ServiceReport | None = None
        """The burst service's last report (rank 0)."""

    def register_services(self) -> None:
        if self._b.rank == 0:
            self._b.register("overlay.burst-register", self._svc_burst_register)
            self._b.register("overlay.burst-release", self._svc_burst_release)
            self._b.register("overlay.burst-service", self._svc_burst_service)

    def prefix_of(self, rank: int) -> str:
        """The burst that registered `rank` ("" for a bootstrap host)."""
        return self._prefixes.get(rank, "")

    def service_view(self) -> ServiceView:
        """The burst service's state now (burst_service.service_view): what status and pending jobs show."""
        return service_view(self._service, time.monotonic())

    def _svc_burst_service(self, req: Request) -> Empty:
        """The burst service reports its state (burst_service.py): running, or failed/stopped and why."""
        state = req.get("state", str)
        if state not in REPORTED:
            raise ServiceError(EINVAL, f"burst-service: state {state!r} is not one of {', '.join(REPORTED)}")
        stale_after = req.payload.get("stale_after", DEFAULT_STALE_AFTER)
        if isinstance(stale_after, bool) or not isinstance(stale_after, (int, float)) or not 0 < stale_after < 1e9:
            raise ServiceError(EINVAL, f"burst-service: stale_after {stale_after!r} must be a positive number")
        reason = req.get("reason", str, required=False, default="")
        pid = req.get("pid", int, required=False, default=0)
        self._service = ServiceReport(state, reason, pid, time.monotonic(), float(stale_after))
        return {}

    def _svc_burst_register(self, req: Request) -> BurstRegistered:
        prefix = req.get("prefix", str)
        hosts = req.get("hosts", list)
        ranks = self.register(prefix, [str(h) for h in hosts])
        return {"ranks": ranks, "size": self._b.size, "hostnames": self._b.config.hostnames}

    def _svc_burst_release(self, req: Request) -> BurstReleased:
        return {"released": self.release(req.get("prefix", str)), "size": self._b.size}

    def register(self, prefix: str, hosts: list[str]) -> list[int]:
        """Append hosts of one burst as ranks (idempotent for hosts already registered under this prefix)."""
        if not prefix or not hosts:
            raise ServiceError(EINVAL, "burst-register: a prefix and at least one host are required")
        known = self._b.config.hostnames
        for host in hosts:
            if not host.startswith(prefix) or host == prefix:
                raise ServiceError(EINVAL, f"burst-register: host {host!r} is not under the burst's prefix {prefix!r}")
        pre_registered = [h for r, h in enumerate(known) if r not in self._prefixes]
        clash = next((h for h in pre_registered if h.startswith(prefix)), None)
        if clash is not None:
            raise ServiceError(EINVAL, f"burst-register: prefix {prefix!r} also names bootstrap host {clash!r}")
        new: list[str] = []
        for host in hosts:
            if host in known:
                rank = known.index(host)
                if self._prefixes.get(rank) != prefix:
                    raise ServiceError(EINVAL, f"burst-register: host {host!r} is already rank {rank}")
            elif host not in new:
                new.append(host)
        first = self._b.size
        if new:
            self._b.set_hosts(self._b.config.hosts + tuple(HostEntry(host=h) for h in new))
            for rank in range(first, self._b.size):
                self._prefixes[rank] = prefix
            self._b.log(f"burst {prefix}: registered {', '.join(new)} as ranks {first}-{self._b.size - 1}")
        return [self._b.config.hostnames.index(h) for h in hosts]

    def release(self, prefix: str) -> list[int]:
        """Forget a burst's ranks: tell their brokers to stop, mark them down, drop trailing ones."""
        ranks = sorted(r for r, p in self._prefixes.items() if p == prefix)
        changed = [rank for rank in ranks if self._b.release_rank(rank, "burst released")]
        for rank in ranks:
            del self._prefixes[rank]
        keep = self._b.size
        while keep > self._b.bootstrap_size and keep - 1 not in self._prefixes:
            keep -= 1  # every rank past the bootstrap hosts is a burst's: trailing released ones go
        if keep < self._b.size:
            self._b.set_hosts(self._b.config.hosts[:keep])
        if changed:
            self._b.publish("membership.update", {"ranks": {str(r): DOWN for r in changed}})
        if ranks:
            self._b.log(f"burst {prefix}: released ranks {ranks[0]}-{ranks[-1]} (size now {self._b.size})")
        return ranks
