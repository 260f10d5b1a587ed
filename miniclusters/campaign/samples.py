"""The campaign's `sample` records (size, CPU requested and allocatable, restarts by pod) and the CPU-seconds
requested, integrated over them; the fields of its `member` records.

A sample is taken each time the cluster is observed, and again right after an act changes what is requested
(a resize the node accepted, a scale-down): the timeline's requested-CPU curve and the CPU-seconds step at the
resize, not at the next observation a tick later (on podman, a tick and an exec: about 3.4 s late).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypedDict

from elasticity.control.ports import ClusterView
from elasticity.policy.autoscale import QueueView


class Sample(TypedDict):
    """One `sample` event's fields: the running pods' CPU requests (by pod), what the nodes offer, the queue."""

    size: int
    requested_m: int
    allocatable_m: int
    pods: dict[int, int]
    pending: int
    running: int
    restarts: int
    pod_restarts: dict[int, int]


class MemberEvent(TypedDict, total=False):
    """One `member` event's fields: its state, and once profiled its ranks' duty cycles and pods."""

    ensemble: str
    member: str
    state: str
    duty: list[float]
    pods: list[int]


@dataclass
class Samples:
    """The last sample and the CPU-seconds requested up to it."""

    cpu_seconds: float = 0.0
    last: Sample | None = None
    _at: float | None = None

    @property
    def requested_m(self) -> int:
        return int(self.last["requested_m"]) if self.last is not None else 0

    def _record(self, now: float, fields: Sample) -> Sample:
        if self._at is not None and self.last is not None:
            self.cpu_seconds += self.last["requested_m"] / 1000.0 * max(0.0, now - self._at)
        self._at, self.last = now, fields
        return fields

    def observed(self, view: ClusterView, queue: QueueView, now: float) -> Sample:
        """The sample of an observation: the running pods' requests, what the nodes offer, each pod's restarts."""
        pods = {p.index: p.cpu_request or 0 for p in view.pods if p.phase == "Running"}
        return self._record(
            now,
            {
                "size": view.size,
                "requested_m": sum(pods.values()),
                "allocatable_m": sum(n.allocatable_millicores for n in view.nodes),
                "pods": pods,
                "pending": len(queue.pending),
                "running": len(queue.running),
                "restarts": sum(p.restarts for p in view.pods),
                "pod_restarts": {p.index: p.restarts for p in view.pods},
            },
        )

    def after_resize(self, requested: Mapping[int, int], now: float) -> Sample | None:
        """The last sample with these pods' new requests (the resizes the node took); None when none changed."""
        if self.last is None:
            return None
        pods = dict(self.last["pods"])
        changed = {i: m for i, m in requested.items() if i in pods and pods[i] != m}
        if not changed:
            return None
        pods.update(changed)
        return self._record(now, {**self.last, "pods": pods, "requested_m": sum(pods.values())})

    def after_scale(self, size: int, now: float) -> Sample | None:
        """The last sample at the new size, without the pods a scale-down removed (a scale-up's pods count once
        they run); None when the size did not change."""
        if self.last is None or size == self.last["size"]:
            return None
        pods = {i: m for i, m in self.last["pods"].items() if i < size}
        return self._record(now, {**self.last, "size": size, "pods": pods, "requested_m": sum(pods.values())})
