"""A fake broker port (port.BrokerPort / ModulePort) for unit tests of the broker's parts, without a broker.

The fake loop keeps its own clock: `advance(seconds)` runs the timers due by then, `settle()` runs what is due
now and the readers whose descriptors are readable (the journal writer's wake-up pipe) until nothing moves. The
port records what the part did: services registered, RPCs sent (answerable by hand), events published, lines
logged. Used by tests/broker/job_manager/ (as flux-core tests its job-manager parts alone).
"""

from __future__ import annotations

import select
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .attributes import Attributes
from .bootstrap import BootstrapConfig, HostEntry
from .loop import Timer
from .membership import UP, Membership
from .payloads import ResourceReport, ServiceView
from .port import EventCallback, ResponseCallback
from .protocol import NODEID_ANY, RESPONSE, Message, request
from .service import Handler, Request


class FakeLoop:
    """call_later/call_every on a virtual clock, and readers polled with select (see the module docstring)."""

    def __init__(self) -> None:
        self.now = 0.0
        self.timers: list[Timer] = []
        self.readers: dict[Any, Callable[[], None]] = {}

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer:
        timer = Timer(self.now + delay, callback, None)
        self.timers.append(timer)
        return timer

    def call_every(self, interval: float, callback: Callable[[], None]) -> Timer:
        timer = Timer(self.now + interval, callback, interval)
        self.timers.append(timer)
        return timer

    def add_reader(self, source: Any, callback: Callable[[], None]) -> None:
        self.readers[source] = callback

    def remove_reader(self, source: Any) -> None:
        self.readers.pop(source, None)

    def stop(self) -> None:
        """Nothing runs on its own here."""

    def pending(self) -> list[Timer]:
        """The timers not yet run nor cancelled."""
        return [t for t in self.timers if not t.cancelled]

    def _run_due(self) -> bool:
        due = sorted((t for t in self.pending() if t.deadline <= self.now), key=lambda t: t.deadline)
        for timer in due:
            self.timers.remove(timer)
            if not timer.cancelled:
                timer.callback()
        return bool(due)

    def _run_readable(self, wait: float) -> bool:
        fds = [fd for fd in self.readers if isinstance(fd, int)]
        if not fds:
            return False
        readable, _, _ = select.select(fds, [], [], wait)
        for fd in readable:
            callback = self.readers.get(fd)
            if callback is not None:
                callback()
        return bool(readable)

    def settle(self, wait: float = 0.5) -> None:
        """Run due timers and readable readers until neither moves for `wait` seconds (of real time)."""
        for _ in range(1000):
            moved = self._run_due()
            moved = self._run_readable(0 if moved else wait) or moved
            if not moved:
                return
        raise AssertionError("the fake loop did not settle")

    def advance(self, seconds: float) -> None:
        """Move the clock on, running the timers due meanwhile (and what they start), then settle."""
        self.now += seconds
        self.settle()


@dataclass
class SentRpc:
    topic: str
    payload: dict[str, Any]  # open: whatever the part under test sent
    nodeid: int
    callback: ResponseCallback
    timeout: float | None

    # open: whatever the test sends
    def answer(self, payload: dict[str, Any] | None = None, errnum: int = 0, errstr: str = "") -> None:
        """Deliver a response to the part, as the router would."""
        self.callback(Message(RESPONSE, self.topic, payload or {}, errnum=errnum, errstr=errstr))


@dataclass
class FakePort:
    """A broker port that records (see the module docstring); `hosts` sets size and hostnames."""

    hosts: list[str] = field(default_factory=lambda: ["node0", "node1"])
    rank: int = 0
    attrs: Attributes = field(default_factory=Attributes)
    loop: FakeLoop = field(default_factory=FakeLoop)
    rundir: str = "/tmp/fake-rundir"
    starttime: float = 1_700_000_000.0
    quorum_reached: bool = True  # what `online` says
    cores: int = 2
    services: dict[str, Handler] = field(default_factory=dict)
    sent: list[SentRpc] = field(default_factory=list)
    published: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # open: any event's payload
    subscribers: list[tuple[str, EventCallback]] = field(default_factory=list)
    logged: list[str] = field(default_factory=list)
    waiting_for_quorum: list[Callable[[], None]] = field(default_factory=list)
    close_hooks: list[Callable[[], None]] = field(default_factory=list)
    gone_hooks: list[Callable[[tuple[str, ...]], None]] = field(default_factory=list)
    membership: Membership = field(init=False)

    def __post_init__(self) -> None:
        self.membership = Membership(list(self.hosts))
        for rank in range(len(self.hosts)):
            report: ResourceReport = {"rank": rank, "cores": f"0-{self.cores - 1}", "ncores": self.cores}
            self.membership.set(rank, UP, resources=report)

    # ------------------------------------------------------------------ BrokerPort
    @property
    def size(self) -> int:
        return len(self.hosts)

    @property
    def hostnames(self) -> list[str]:
        return list(self.hosts)

    def register(self, topic: str, handler: Handler) -> None:
        self.services[topic] = handler

    def rpc(
        self,
        topic: str,
        payload: Mapping[str, Any] | None,  # open: whatever the part under test sends
        nodeid: int,
        callback: ResponseCallback,
        timeout: float | None = None,
    ) -> int:
        self.sent.append(SentRpc(topic, dict(payload or {}), nodeid, callback, timeout))
        return len(self.sent)

    def publish(self, topic: str, payload: dict[str, Any] | None = None) -> None:  # open: any event's payload
        self.published.append((topic, payload or {}))
        self.deliver(topic, payload or {})

    def deliver(self, topic: str, payload: dict[str, Any]) -> None:  # open: any event's payload
        """An event reaches this broker's subscribers (as from the tree)."""
        msg = Message("event", topic, payload)
        for prefix, callback in list(self.subscribers):
            if topic.startswith(prefix):
                callback(msg)

    def subscribe(self, prefix: str, callback: EventCallback) -> None:
        self.subscribers.append((prefix, callback))

    def log(self, text: str) -> None:
        self.logged.append(text)

    def debug(self, text: str) -> None:
        self.logged.append(text)

    # ------------------------------------------------------------------ ModulePort
    @property
    def config(self) -> BootstrapConfig:
        return BootstrapConfig(hosts=tuple(HostEntry(host=h) for h in self.hosts))

    @property
    def local_uri(self) -> str:
        return f"local://{self.rundir}/local"

    @property
    def resources(self) -> ResourceReport:
        return {"rank": self.rank, "cores": f"0-{self.cores - 1}", "ncores": self.cores}

    def burst_view(self) -> ServiceView:
        return {"state": "absent", "reason": "none has reported", "pid": 0, "age": None}

    def on_close(self, callback: Callable[[], None]) -> None:
        self.close_hooks.append(callback)

    @property
    def online(self) -> bool:
        return self.quorum_reached

    def on_online(self, callback: Callable[[], None]) -> None:
        if self.quorum_reached:
            callback()
        else:
            self.waiting_for_quorum.append(callback)

    def on_client_gone(self, callback: Callable[[tuple[str, ...]], None]) -> None:
        self.gone_hooks.append(callback)

    # ------------------------------------------------------------------ for the tests
    def sent_to(self, topic: str) -> list[SentRpc]:
        return [rpc for rpc in self.sent if rpc.topic == topic]


@dataclass
class Replies:
    """The responses a fake request received (a request is answered once; kept in order)."""

    messages: list[Message] = field(default_factory=list)

    @property
    def last(self) -> Message:
        assert self.messages, "no response yet"
        return self.messages[-1]

    @property
    def payload(self) -> dict[str, Any]:  # open: any service's reply
        msg = self.last
        assert not msg.errnum, f"error {msg.errnum}: {msg.errstr}"
        return msg.decoded().payload if msg.encoded_payload else msg.payload


def fake_request(
    topic: str,
    payload: dict[str, Any] | None = None,  # open: any service's request
    route: tuple[str, ...] = ("c:01",),
) -> tuple[Request, Replies]:
    """A request as a local client sends it, and where its response lands."""
    msg = request(topic, payload, NODEID_ANY)
    msg.route = list(route)
    replies = Replies()
    return Request(msg, replies.messages.append), replies
