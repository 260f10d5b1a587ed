"""Observer and Actuator (elasticity/control/ports.py) over the Backend interface, for the multiplexing loop.

A bridge until the backends implement the ports themselves (issue 12): it reads `Backend.status` into a
ClusterView and sends `resize_many` as one `Backend.resize` per pod, mapping the backend's answers onto the
ports' outcomes. Pod restarts are counted from the pods' identities when the backend can tell them (the local
backend: pid and start time; Kubernetes: the containers' restartCount through the pod conditions' absence).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from elasticity.control.ports import (
    ActuatorError,
    ClusterView,
    PodResize,
    PodView,
    Rejected,
    ResizeOutcome,
    ScaleResult,
)
from elasticity.model.node import Node
from elasticity.model.resources import cpu_millicores, format_millicores
from miniclusters.backends.base import Backend, BackendError, InvalidRequestError


def _milli(value: str | None) -> int | None:
    if value in (None, ""):
        return None
    try:
        return cpu_millicores(value)
    except ValueError:
        return None


@dataclass
class BackendPorts:
    """Observer + Actuator for one backend. `allocatable_m`: the nodes' CPU for the cluster's pods."""

    backend: Backend
    allocatable_m: int
    node_name: str = "node"
    identity: Callable[[str], Mapping[int, object]] | None = None
    """name -> pod index -> something that changes when the pod restarts (local: pid and start time)."""
    restarts: dict[int, int] = field(default_factory=dict)
    _seen: dict[int, object] = field(default_factory=dict)

    def observe(self, name: str) -> ClusterView:
        try:
            status = self.backend.status(name)
        except BackendError as exc:
            raise ActuatorError(str(exc)) from None
        if self.identity is not None:
            for index, ident in self.identity(name).items():
                if index in self._seen and self._seen[index] != ident:
                    self.restarts[index] = self.restarts.get(index, 0) + 1
                self._seen[index] = ident
        pods = tuple(
            PodView(
                index=p.index,
                name=p.name,
                phase=p.phase,
                ready=p.ready,
                cpu_request=_milli(p.cpu_desired),
                cpu_actual=_milli(p.cpu_actual),
                restarts=self.restarts.get(p.index, 0),
                node=p.node or self.node_name,
            )
            for p in status.pods
        )
        nodes = tuple(
            Node(n, self.allocatable_m // max(1, len({p.node for p in pods}))) for n in {p.node for p in pods} if n
        )
        return ClusterView(name, status.size, status.min_size, status.max_size, pods, nodes)

    def scale(self, name: str, size: int) -> ScaleResult:
        try:
            previous = self.backend.status(name).size
            self.backend.scale(name, size)
        except InvalidRequestError as exc:
            raise Rejected(str(exc)) from None
        except BackendError as exc:
            raise ActuatorError(str(exc)) from None
        return ScaleResult(name, previous, size)

    def resize_many(self, name: str, requests: Mapping[int, int]) -> dict[int, PodResize]:
        out = {}
        for index, milli in sorted(requests.items()):
            if milli < 0:
                raise Rejected(f"pod {index}: negative CPU request {milli}m")
            try:
                result = self.backend.resize(name, index, format_millicores(milli))
            except InvalidRequestError as exc:
                raise Rejected(str(exc)) from None
            except BackendError as exc:
                raise ActuatorError(str(exc)) from None
            out[index] = PodResize(
                index,
                ResizeOutcome(result.outcome.value),
                result.message if not result.ok else "",
                milli,
                _milli(result.cpu_actual),
            )
        return out
