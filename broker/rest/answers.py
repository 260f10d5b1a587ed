"""What the REST server reads beyond the broker's own answers (whose one shape is in broker/payloads.py and
broker/jobs/shapes.py): a job's eventlog entries and output events, the page's CPU readings. JSON enters
untyped; it is cast at the one place each answer is received."""

from __future__ import annotations

from typing import Any, TypedDict

from broker.payloads import CpuReport


class CpuReading(CpuReport, total=False):
    """A rank's `resource.cpu` answer as the cluster page keeps it, or why it could not be asked (`error`)."""

    error: str


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
