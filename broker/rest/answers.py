"""The broker's RPC answers the REST server reads, as TypedDicts: only the keys read here (total=False, since
an older broker or another flavour may leave some out). JSON enters untyped; it is cast to these at the one
place each answer is received (broker/rest/metrics.py, broker/rest/web/cluster_data.py)."""

from __future__ import annotations

from typing import Any, TypedDict


class RankReport(TypedDict, total=False):
    """`resource.status`'s report of one rank."""

    ncores: int


class ResourceStatus(TypedDict, total=False):
    """`resource.status`: the up ranks (an idset), each rank's hostname and report (keyed by the rank as text)."""

    up: str
    hostnames: list[str]
    reports: dict[str, RankReport]


class CpuCounters(TypedDict, total=False):
    """What a rank's CPU request and use are computed from: in `resource.cpu`'s answer as the broker sends it
    (broker.payloads.CpuReport) and as the REST server keeps it (CpuReport). A counter the broker cannot read is
    None."""

    knob: str
    weight: int | None
    usage_usec: int | None
    time: float


class CpuReport(CpuCounters, total=False):
    """`resource.cpu` of one rank: its cgroup's CPU weight and usage (or why they cannot be read)."""

    cgroup: str
    error: str


class Drain(TypedDict, total=False):
    """One drained rank in `job-manager.queue-state`'s `drain` table."""

    reason: str
    timestamp: float


class RunningJob(TypedDict, total=False):
    ranks: list[int]
    cores: dict[str, int]


class QueueState(TypedDict, total=False):
    """`job-manager.queue-state`: the running jobs, the drained ranks and why each is drained."""

    running: list[RunningJob]
    drained: list[int]
    drain: dict[str, Drain]


class JobStats(TypedDict, total=False):
    """`job-manager.stats`: how many jobs are in each state."""

    states: dict[str, int]


class EventRecord(TypedDict):
    """One entry of a job's eventlog (RFC 21), as the job page shows it."""

    timestamp: float
    name: str
    context: dict[str, Any]  # open: the event's context; its keys are the event's (RFC 21, RFC 24)


class OutputContext(TypedDict, total=False):
    """The context of an RFC 24 output "data" event."""

    stream: str
    rank: str
    data: str
    encoding: str
    repeat: int
