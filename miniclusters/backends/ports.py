"""Every backend as the control ports (elasticity/control/ports.py), so a loop written once runs on both.

A Backend already observes (`observe`) and acts (`scale_to`, `resize_many`); the Backend protocol's `scale`
returns a ClusterStatus for people, the Actuator's `scale` a ScaleResult for loops, so the actuator is a thin
view over the backend. Whoever asks for a new size (CLI, operator's callers, autoscaler) reaches the same writer.
"""

from __future__ import annotations

from collections.abc import Mapping

from elasticity.control.ports import Actuator, ClusterView, Observer, PodResize, ScaleResult
from miniclusters.backends.base import Backend


class BackendActuator:
    """The Actuator port over a backend."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    def scale(self, name: str, size: int) -> ScaleResult:
        return self.backend.scale_to(name, size)

    def resize_many(self, name: str, requests: Mapping[int, int]) -> dict[int, PodResize]:
        return self.backend.resize_many(name, requests)


class BackendObserver:
    """The Observer port over a backend."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    def observe(self, name: str) -> ClusterView:
        return self.backend.observe(name)


def ports_for(backend: Backend) -> tuple[Observer, Actuator]:
    """(observer, actuator) acting on `backend`."""
    return BackendObserver(backend), BackendActuator(backend)
