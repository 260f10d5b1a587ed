"""Node capacity and in-place resize admission on plain millicores (KEP-1287; REFERENCE.md section 4).

A node has an allocatable CPU. Each pod on it has three CPU values: desired (the pod spec's request, what was
asked for), allocated (what the kubelet admitted) and actual (what the container runs with now).
- The scheduler counts max(desired, allocated, actual) per pod, so lowering a request frees headroom only after
  the kubelet applied it: `PodCpu.counted`, `free_millicores`.
- The kubelet admits a resize against the node's allocatable CPU: more than the node could ever give is
  Infeasible (never retried); more than is free beside the other pods now is Deferred (retried later); a resize
  that does not grow the pod always fits.
The Kubernetes fake, the local backend and the simulator all ask `admit_resize`, so they answer alike.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from elasticity.model.resources import format_millicores


@dataclass(frozen=True)
class PodCpu:
    """One pod's CPU on a node, in millicores (0 = no request)."""

    name: str
    desired: int
    allocated: int
    actual: int

    @property
    def counted(self) -> int:
        """What the scheduler reserves for this pod: max(desired, allocated, actual)."""
        return max(self.desired, self.allocated, self.actual)

    @property
    def committed(self) -> int:
        """What the kubelet has given this pod: max(allocated, actual) (a pending request is not yet given)."""
        return max(self.allocated, self.actual)


@dataclass(frozen=True)
class Node:
    """A node as admission sees it: a name and its allocatable CPU."""

    name: str
    allocatable_millicores: int


class Verdict(StrEnum):
    """The kubelet's answer to a resize (PodResizePending reasons, plus accepted)."""

    ACCEPTED = "accepted"
    DEFERRED = "deferred"
    """Not possible beside the other pods now; retried when they shrink or leave."""
    INFEASIBLE = "infeasible"
    """More than the node could ever give; never retried."""


@dataclass(frozen=True)
class Admission:
    verdict: Verdict
    message: str = ""
    """Why, in the kubelet's words (empty when accepted)."""

    @property
    def reason(self) -> str:
        """The PodResizePending condition's reason: Deferred or Infeasible ("" when accepted)."""
        return {Verdict.DEFERRED: "Deferred", Verdict.INFEASIBLE: "Infeasible"}.get(self.verdict, "")

    @property
    def accepted(self) -> bool:
        return self.verdict == Verdict.ACCEPTED


def free_millicores(node: Node, pods: Iterable[PodCpu]) -> int:
    """Allocatable CPU the scheduler still sees free (may be negative on an over-committed node)."""
    return node.allocatable_millicores - sum(p.counted for p in pods)


def admit_resize(node: Node, current: int, desired: int, others: Iterable[PodCpu]) -> Admission:
    """Whether the kubelet admits resizing one pod from `current` (its committed CPU) to `desired` millicores.

    `others` are the other active pods on the node; each counts with what the kubelet committed to it.
    """
    capacity = node.allocatable_millicores
    used = sum(p.committed for p in others)
    if desired > capacity:
        return Admission(Verdict.INFEASIBLE, infeasible_message(desired, capacity))
    if desired > current and desired + used > capacity:
        return Admission(Verdict.DEFERRED, deferred_message(desired, used, capacity))
    return Admission(Verdict.ACCEPTED)


def infeasible_message(desired: int, capacity: int) -> str:
    """The kubelet's words for an Infeasible resize."""
    return (
        f"Node didn't have enough capacity: cpu, requested: {format_millicores(desired)}, "
        f"capacity: {format_millicores(capacity)}"
    )


def deferred_message(desired: int, used: int, capacity: int) -> str:
    """The kubelet's words for a Deferred resize."""
    return (
        f"Node didn't have enough resource: cpu, requested: {format_millicores(desired)}, "
        f"used: {format_millicores(used)}, capacity: {format_millicores(capacity)}"
    )
