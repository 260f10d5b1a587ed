"""The ports every loop (autoscaler, multiplexing, pools, the simulator) observes and acts through.

This module is the contract between the pure decision layer and the backends that implement it (the local
backend, the Kubernetes backend, `elasticity.sim`). It names only plain numbers and frozen dataclasses: no
Kubernetes objects, no quantity strings (CPU is in millicores), no broker handles. Names and signatures here are
stable; add fields with defaults rather than changing existing ones.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol, runtime_checkable

from elasticity.errors import ElasticityError
from elasticity.model.node import Node
from elasticity.model.size import SizeRange, size_range


class ActuatorError(ElasticityError):
    """Acting failed (backend unreachable, refused, timed out); `str()` is the whole message for a user."""


class Rejected(ActuatorError):
    """The request itself is wrong (size out of range, no such pod); nothing was changed. `str()` says why."""


class ResizeOutcome(StrEnum):
    """What became of an in-place CPU resize of one pod (KEP-1287's pod conditions, plus done)."""

    ACCEPTED = "accepted"
    """The request was stored; the kubelet has not reported on it yet."""
    IN_PROGRESS = "in-progress"
    """Admitted; the kubelet is applying it (PodResizeInProgress)."""
    DEFERRED = "deferred"
    """Not possible beside the other pods now (PodResizePending, reason Deferred); retried later."""
    INFEASIBLE = "infeasible"
    """More than the node could ever give (PodResizePending, reason Infeasible); never retried."""
    DONE = "done"
    """Applied: the container runs with the new request."""


@dataclass(frozen=True)
class PodView:
    """One pod as a loop sees it. CPU values are millicores; None when unknown (pod not running, no reading)."""

    index: int
    name: str
    phase: str
    """Pending, Running, Succeeded, Failed or Unknown (Kubernetes' pod phases; the local backend uses the same)."""
    ready: bool = False
    cpu_request: int | None = None
    """The request in the pod spec (desired; 0 = no request)."""
    cpu_actual: int | None = None
    """What the container runs with now (after the kubelet or cgroup applied any resize)."""
    restarts: int = 0
    resize: ResizeOutcome | None = None
    """The last resize's state when it has not simply been applied (deferred, infeasible, in-progress)."""
    resize_reason: str = ""
    """Why, in the node's words (e.g. "Node didn't have enough capacity: cpu, requested: 64, capacity: 2")."""
    node: str | None = None


@dataclass(frozen=True)
class ClusterView:
    """One MiniCluster at one instant: everything a plan may look at. Frozen so a plan cannot change it."""

    name: str
    size: int
    """Pods wanted now (spec.size)."""
    min_size: int
    """spec.minSize as written (0 when unset); the allowed floor is max(1, min_size)."""
    max_size: int
    """Hosts registered when the cluster was created: the ceiling of scaling."""
    pods: tuple[PodView, ...] = ()
    nodes: tuple[Node, ...] = ()
    """Allocatable CPU of the nodes the pods run on (empty when the backend cannot tell)."""
    observed_at: float = 0.0
    """The observer's clock when this view was taken (seconds; the same clock the loop passes to plans)."""

    @property
    def sizes(self) -> SizeRange:
        """[max(1, minSize), maxSize]."""
        return size_range(self.min_size, self.max_size)

    def pod(self, index: int) -> PodView | None:
        return next((p for p in self.pods if p.index == index), None)


@dataclass(frozen=True)
class PodResize:
    """The answer for one pod of a `resize_many` call."""

    index: int
    outcome: ResizeOutcome
    reason: str = ""
    """Why, in the node's words when refused; what was done when done (may be empty)."""
    cpu_requested: int = 0
    cpu_actual: int | None = None

    @property
    def ok(self) -> bool:
        """False when the node refused (deferred or infeasible): the pod keeps its old CPU."""
        return self.outcome not in (ResizeOutcome.DEFERRED, ResizeOutcome.INFEASIBLE)


@dataclass(frozen=True)
class ScaleResult:
    name: str
    previous: int
    size: int


@runtime_checkable
class Observer(Protocol):
    """Reads the world. One call gives one consistent view; it never changes anything."""

    def observe(self, name: str) -> ClusterView:
        """The cluster now. Raises KeyError-like backend errors when it does not exist."""
        ...


@runtime_checkable
class Actuator(Protocol):
    """Changes the world. The actuator is the ONE writer of a MiniCluster's size and of its pods' CPU requests:
    CLI, operator, autoscaler and HPA all ask it, so there is never a second writer to race."""

    def scale(self, name: str, size: int) -> ScaleResult:
        """Set the cluster's size; raises Rejected (nothing changed) outside [max(1, minSize), maxSize].

        Scaling down removes the highest indexes; the lead (index 0) is never removed.
        """
        ...

    def resize_many(self, name: str, requests: Mapping[int, int]) -> dict[int, PodResize]:
        """Set the CPU request (millicores) of several pods in place, one answer per pod index asked.

        Batched so a backend observes once and writes N times (not N round trips). Pods are admitted in index
        order against their node (`elasticity.model.node.admit_resize`), each seeing the ones admitted before it:
        a refused pod keeps its CPU and says why; the others still change. Raises Rejected (nothing changed) for
        an unknown index or a negative request.
        """
        ...
