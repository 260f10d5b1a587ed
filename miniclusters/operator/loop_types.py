"""The types the operator's controller and its loop supervisors share: which cluster, and what a loop decided.

A module of their own below both, so the supervisors (autoscaling, multiplexing, campaign, runners) need not
import the controller that imports them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from miniclusters.backends.kubernetes.api import FLUX_MINICLUSTER, MINICLUSTER, Kind


@dataclass(frozen=True, order=True)
class ClusterKey:
    """One MiniCluster (ours or the Flux Operator's kind) the controller reconciles."""

    api_version: str
    namespace: str
    name: str

    @property
    def kind(self) -> Kind:
        return FLUX_MINICLUSTER if self.api_version == FLUX_MINICLUSTER.api_version else MINICLUSTER

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class Decision:
    """What a loop last did: its condition, and the Event to record (None: nothing new)."""

    status: bool
    reason: str
    message: str
    event_type: Literal["Normal", "Warning"] | None = None

    @property
    def condition(self) -> tuple[bool, str, str]:
        return self.status, self.reason, self.message
