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
