"""The status plumbing the podman and Kubernetes backends share: how they wait and poll, and how a pod's or a
cluster's status becomes the Observer port's view. Each backend reads its pods its own way; what it reports
from them is built here once."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from elasticity.control.ports import ClusterView, PodView
from elasticity.model.node import Node
from miniclusters.api.quantity import cpu_millicores
from miniclusters.api.spec import MiniCluster
from miniclusters.backends.base import ClusterCondition, ClusterStatus, PodStatus, ResizeOutcome
from miniclusters.backends.overlay import lead_ranks
from miniclusters.backends.wait import ProgressCallback, wait_until_ready

Ranks = tuple[tuple[int, ...], tuple[int, ...]]


@dataclass(frozen=True)
class Polling:
    """How a backend waits: its clock, its sleep, how often it looks, and who hears of the progress."""

    clock: Callable[[], float]
    sleep: Callable[[float], None]
    interval: float
    progress: ProgressCallback | None = None

    def wait_ready(self, read_status: Callable[[], ClusterStatus], timeout: float) -> ClusterStatus:
        """read_status until the cluster is up (wait.py says when), or BackendTimeoutError after `timeout`."""
        return wait_until_ready(
            read_status,
            timeout=timeout,
            clock=self.clock,
            sleep=self.sleep,
            interval=self.interval,
            progress=self.progress,
        )


def millicores(quantity: str | None) -> int | None:
    """A CPU quantity in millicores (None stays None: unknown)."""
    return cpu_millicores(quantity) if quantity is not None else None


def pod_view(status: PodStatus, restarts: int, resize: ResizeOutcome | None = None, resize_reason: str = "") -> PodView:
    """One pod's status as the Observer port's PodView."""
    return PodView(
        index=status.index,
        name=status.name,
        phase=status.phase,
        ready=status.ready,
        cpu_request=millicores(status.cpu_desired),
        cpu_actual=millicores(status.cpu_actual),
        restarts=restarts,
        resize=resize,
        resize_reason=resize_reason,
        node=status.node,
    )


def cluster_view(
    mc: MiniCluster, pods: tuple[PodView, ...], max_size: int, observed_at: float, nodes: tuple[Node, ...] = ()
) -> ClusterView:
    """The Observer port's view of one cluster: its sizes from the spec, the ceiling as the backend knows it."""
    return ClusterView(
        name=mc.name,
        size=mc.spec.size,
        min_size=mc.spec.min_size,
        max_size=max_size,
        pods=pods,
        nodes=nodes,
        observed_at=observed_at,
    )


@dataclass(frozen=True)
class LeadReport:
    """What a status says of the lead: the ranks its broker reports up and down, or why it could not be asked."""

    ranks_up: tuple[int, ...] | None
    ranks_down: tuple[int, ...] | None
    error: str | None

    @classmethod
    def asked(cls, running: bool, finished: bool, ask: Callable[[], Ranks]) -> LeadReport:
        """Ask a running lead for its overlay (overlay.lead_ranks says what a lead not running means)."""
        return cls(*lead_ranks(running, finished, ask))


def cluster_status(
    mc: MiniCluster,
    namespace: str,
    pods: tuple[PodStatus, ...],
    lead: LeadReport,
    finished: bool,
    succeeded: bool | None,
    rest_url: str | None,
    conditions: tuple[ClusterCondition, ...] = (),
) -> ClusterStatus:
    """A cluster's status: its sizes from the spec, its pods, what its lead says and how its run ended."""
    return ClusterStatus(
        name=mc.name,
        namespace=namespace,
        size=mc.spec.size,
        max_size=mc.spec.effective_max_size,
        min_size=mc.spec.min_size,
        pods=pods,
        ranks_up=lead.ranks_up,
        ranks_down=lead.ranks_down,
        conditions=conditions,
        finished=finished,
        succeeded=succeeded,
        lead_error=lead.error,
        rest_url=rest_url,
    )
