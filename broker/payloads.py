"""The shapes of the broker's own JSON payloads (its built-in services, membership, resources): TypedDicts, so
their keys are checked where they are made and read. Below every part of the broker; imports none of them."""

from __future__ import annotations

from typing import TypedDict


class ResourceReport(TypedDict, total=False):
    """One broker's resources (resources.local_resources), as it reports them to its parent at hello."""

    rank: int
    hostname: str
    cores: str
    ncores: int
    memory: int


class ServiceView(TypedDict):
    """The burst service's state as the lead sees it (burst_service.service_view)."""

    state: str
    reason: str
    pid: int
    age: float | None


class Empty(TypedDict):
    """A reply with nothing to say but success ({})."""


class RankEntry(TypedDict):
    """One rank as membership reports it (membership.RankInfo.as_dict): in hello/update messages and status."""

    state: str
    hostname: str
    resources: ResourceReport | None
    uuid: str
    since: float


class HelloPayload(TypedDict, total=False):
    """overlay.hello, a child's first word to its parent (JSON from the child: each field checked where read)."""

    rank: int
    uuid: str
    hostname: str
    size: int
    pid: int
    resources: ResourceReport
    subtree: dict[str, RankEntry]


class ControlPayload(HelloPayload, total=False):
    """An overlay control message's payload: hello's keys (above), a parent's welcome (`rank`), an update
    (`ranks`: membership snapshots by rank), a deny or a shutdown (`reason`); heartbeats, goodbye and reset,
    and a client's disconnect, carry none."""

    reason: str
    ranks: dict[str, RankEntry]


class CpuReport(TypedDict, total=False):
    """resource.cpu (cpu_report.cpu_report): the broker's cgroup, its CPU weight and usage."""

    rank: int
    hostname: str
    cgroup: str
    knob: str
    weight: int | None
    usage_usec: int | None
    usage_from: str
    time: float


class PendingJob(TypedDict):
    """A pending job in job-manager.queue-state: the nodes it needs and its time limit."""

    id: int
    nnodes: int
    duration: float


class RunningJob(TypedDict):
    """A running job in job-manager.queue-state: its ranks and the cores it holds on each (by rank as text)."""

    id: int
    ranks: list[int]
    cores: dict[str, int]


class DrainEntry(TypedDict):
    """Why and since when a rank is drained (queue-state's `drain`, by rank as text)."""

    reason: str
    timestamp: float


class QueueState(TypedDict):
    """job-manager.queue-state (what the autoscalers, `flux resource status` and the lead's pages read): pending
    and running jobs, the drained ranks and why each is drained."""

    pending: list[PendingJob]
    running: list[RunningJob]
    drained: list[int]
    drain: dict[str, DrainEntry]


class PingReply(TypedDict):
    rank: int
    hostname: str
    pid: int
    route: list[int]
    pad: str


class InfoReply(TypedDict):
    rank: int
    size: int
    hostname: str
    parent: int
    children: list[int]
    connected_children: list[int]
    state: str
    joined: bool
    uuid: str
    pid: int
    resources: ResourceReport


class UptimeReply(TypedDict):
    rank: int
    state: str
    starttime: float
    uptime: float
    size: int
    depth: int


class AttrValue(TypedDict):
    name: str
    value: str


class OverlayRank(TypedDict):
    rank: int
    hostname: str
    state: str
    status: str
    parent: int
    since: float
    burst: str


class OverlayStatus(TypedDict):
    size: int
    topology: str
    parents: list[int]
    state: str
    ranks: list[OverlayRank]
    burst_service: ServiceView


class RLiteEntry(TypedDict):
    rank: str
    children: dict[str, str]


class RExecution(TypedDict):
    R_lite: list[RLiteEntry]
    starttime: float
    expiration: float
    nodelist: list[str]


class RSpec(TypedDict):
    """Flux's R, version 1 (resources.build_R)."""

    version: int
    execution: RExecution


class ResourceStatus(TypedDict):
    R: RSpec
    up: str
    down: str
    hostnames: list[str]
    reports: dict[str, ResourceReport]


class BurstRegistered(TypedDict):
    ranks: list[int]
    size: int
    hostnames: list[str]


class BurstReleased(TypedDict):
    released: list[int]
    size: int


class SubinstancePlan(TypedDict):
    """What job-exec writes for a sub-instance's broker on one rank (modules/subinstance.launch_command) and
    `python -m broker.subinstance` reads: its place, its hosts [name, address], cores, command and attributes."""

    index: int
    hosts: list[list[str]]
    cores: list[int]
    cert: str | None
    command: list[str]
    level: int
    rundir: str
    attrs: dict[str, str]
