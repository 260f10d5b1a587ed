"""The narrow port through which the broker's modules and the job manager's parts use the broker.

A module entry point (`Module`) is given a :class:`ModulePort`; the job manager's parts are given only the
:class:`BrokerPort` (register a service, rpc, publish, subscribe, log, attributes, rank and size, timers) plus
the collaborators they need, passed explicitly. The broker (broker.py) satisfies both structurally; tests pass
fakes (tests/broker/job_manager/fakes.py). This module sits below every part: it imports no part.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from .attributes import Attributes
from .bootstrap import BootstrapConfig
from .loop import Timers
from .membership import Membership
from .payloads import ResourceReport, ServiceView
from .protocol import Message
from .service import Handler

ResponseCallback = Callable[[Message], None]
EventCallback = Callable[[Message], None]


class Publisher(Protocol):
    """What publishes an event to the instance: the broker, and each part's narrow view of it (tree_host,
    burst_ranks, builtin_services), which names it here once."""

    def publish(self, topic: str, payload: dict[str, Any] | None = None) -> None:  # open: any event's payload
        ...


class BrokerPort(Publisher, Protocol):
    """What a part of a module needs from the broker it runs in."""

    @property
    def rank(self) -> int: ...

    @property
    def size(self) -> int: ...

    @property
    def attrs(self) -> Attributes: ...

    @property
    def loop(self) -> Timers:
        """Timers (call_later) and readers: the broker's one event loop."""
        ...

    @property
    def hostnames(self) -> list[str]:
        """The instance's hosts by rank now (bursts append and remove some)."""
        ...

    def register(self, topic: str, handler: Handler) -> None: ...

    def rpc(
        self,
        topic: str,
        payload: Mapping[str, Any] | None,  # open: any service's request payload (each has its TypedDict)
        nodeid: int,
        callback: ResponseCallback,
        timeout: float | None = None,
    ) -> int: ...

    def subscribe(self, prefix: str, callback: EventCallback) -> None: ...

    def log(self, text: str) -> None: ...

    def debug(self, text: str) -> None: ...


class ModulePort(BrokerPort, Protocol):
    """What a module's entry point gets: the port, and the broker's hooks and facts a module's set-up reads."""

    @property
    def config(self) -> BootstrapConfig: ...

    @property
    def rundir(self) -> str: ...

    @property
    def local_uri(self) -> str: ...

    @property
    def starttime(self) -> float: ...

    @property
    def resources(self) -> ResourceReport: ...

    @property
    def membership(self) -> Membership: ...

    @property
    def online(self) -> bool:
        """Whether the instance's quorum has joined (rank 0)."""
        ...

    def burst_view(self) -> ServiceView:
        """The burst service's state now (burst_ranks.BurstRanks.service_view)."""
        ...

    def on_close(self, callback: Callable[[], None]) -> None: ...

    def on_online(self, callback: Callable[[], None]) -> None: ...

    def on_client_gone(self, callback: Callable[[tuple[str, ...]], None]) -> None: ...


Module = Callable[[ModulePort], None]
"""A broker module's entry point (broker/modules/__init__.py lists the default ones)."""
