"""Observer and Actuator over a `Backend` (local or Kubernetes), for the autoscaling loop.

Thin on purpose: the backend already enforces [max(1, minSize), maxSize] and that the lead is never removed;
this only translates its status into the frozen ClusterView the plans read.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from elasticity.control.ports import ActuatorError, ClusterView, PodResize, PodView, ScaleResult
from miniclusters.backends.base import Backend


class BackendPorts:
    def __init__(self, backend: Backend, clock: Callable[[], float] = time.monotonic) -> None:
        self.backend = backend
        self.clock = clock

    def observe(self, name: str) -> ClusterView:
        status = self.backend.status(name)
        pods = tuple(
            PodView(index=p.index, name=p.name, phase=p.phase, ready=p.ready, node=p.node) for p in status.pods
        )
        return ClusterView(
            name=name,
            size=status.size,
            min_size=status.min_size,
            max_size=status.max_size,
            pods=pods,
            observed_at=self.clock(),
        )

    def scale(self, name: str, size: int) -> ScaleResult:
        previous = self.backend.status(name).size
        status = self.backend.scale(name, size)
        return ScaleResult(name, previous, status.size)

    def resize_many(self, name: str, requests: Mapping[int, int]) -> dict[int, PodResize]:
        raise ActuatorError("in-place CPU resizes are not part of autoscaling")
