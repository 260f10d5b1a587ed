"""A simulated MiniCluster on simulated nodes: an Observer and an Actuator over `elasticity.model`.

It answers exactly as the backends must: sizes within [max(1, minSize), maxSize], scale-down removing the highest
indexes, resizes admitted by `admit_resize` against the pod's node (deferred/infeasible with the kubelet's
reason, nothing applied). Time is the clock it is given, so a loop over it is deterministic.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from elasticity.control.ports import (
    ClusterView,
    PodResize,
    PodView,
    Rejected,
    ResizeOutcome,
    ScaleResult,
)
from elasticity.model.node import Node, PodCpu, admit_resize


@dataclass
class SimPod:
    index: int
    node: str
    cpu_desired: int
    cpu_actual: int
    resize: ResizeOutcome | None = None
    resize_reason: str = ""


@dataclass
class SimCluster:
    name: str
    size: int
    min_size: int
    max_size: int
    cpu_per_pod: int
    pods: dict[int, SimPod] = field(default_factory=dict)


class SimulatedCluster:
    """MiniClusters placed on nodes (first node with room, by the scheduler's count), acted on instantly.

    `calls` records every actuator call (for tests: one resize_many is one call, however many pods it names).
    """

    def __init__(self, nodes: list[Node], clock: Callable[[], float] = time.monotonic) -> None:
        if not nodes:
            raise ValueError("a simulated cluster needs at least one node")
        self.nodes = {n.name: n for n in nodes}
        self.clock = clock
        self.clusters: dict[str, SimCluster] = {}
        self.calls: list[tuple[str, str]] = []

    # ------------------------------------------------------------------ set-up
    def create(self, name: str, size: int, max_size: int, min_size: int = 0, cpu_per_pod: int = 0) -> ClusterView:
        """Register a cluster with `max_size` hosts and start `size` pods."""
        if name in self.clusters:
            raise Rejected(f"MiniCluster {name!r} already exists")
        if not 1 <= size <= max_size:
            raise Rejected(f"size {size} is outside [1, {max_size}]")
        cluster = SimCluster(name, 0, min_size, max_size, cpu_per_pod)
        self.clusters[name] = cluster
        self._grow(cluster, size)
        return self.observe(name)

    # ------------------------------------------------------------------ Observer
    def observe(self, name: str) -> ClusterView:
        cluster = self._cluster(name)
        pods = tuple(
            PodView(
                index=p.index,
                name=f"{name}-{p.index}",
                phase="Running",
                ready=True,
                cpu_request=p.cpu_desired,
                cpu_actual=p.cpu_actual,
                resize=p.resize,
                resize_reason=p.resize_reason,
                node=p.node,
            )
            for _, p in sorted(cluster.pods.items())
        )
        used = sorted({p.node for p in cluster.pods.values()})
        return ClusterView(
            name=name,
            size=cluster.size,
            min_size=cluster.min_size,
            max_size=cluster.max_size,
            pods=pods,
            nodes=tuple(self.nodes[n] for n in used),
            observed_at=self.clock(),
        )

    # ------------------------------------------------------------------ Actuator
    def scale(self, name: str, size: int) -> ScaleResult:
        self.calls.append(("scale", name))
        cluster = self._cluster(name)
        view = self.observe(name)
        why = view.sizes.violation(size, cluster.min_size)
        if why is not None:
            raise Rejected(f"MiniCluster {name!r}: size {size} is {why}")
        previous = cluster.size
        if size > previous:
            self._grow(cluster, size)
        else:
            for index in range(size, previous):
                cluster.pods.pop(index, None)
            cluster.size = size
        return ScaleResult(name, previous, size)

    def resize_many(self, name: str, requests: Mapping[int, int]) -> dict[int, PodResize]:
        self.calls.append(("resize_many", name))
        cluster = self._cluster(name)
        for index, milli in requests.items():
            if index not in cluster.pods:
                raise Rejected(f"MiniCluster {name!r} has no pod with index {index}")
            if milli < 0:
                raise Rejected(f"pod {index}: negative CPU request {milli}m")
        out: dict[int, PodResize] = {}
        for index in sorted(requests):
            pod = cluster.pods[index]
            desired = requests[index]
            others = [c for c in self._pod_cpus(pod.node) if c.name != f"{name}-{index}"]
            admission = admit_resize(self.nodes[pod.node], pod.cpu_actual, desired, others)
            pod.cpu_desired = desired  # stored as asked, as the API server stores a resize before the kubelet answers
            if admission.accepted:
                pod.cpu_actual = desired
                pod.resize, pod.resize_reason = None, ""
                out[index] = PodResize(index, ResizeOutcome.DONE, "", desired, desired)
            else:
                outcome = ResizeOutcome(admission.verdict.value)
                pod.resize, pod.resize_reason = outcome, admission.message
                out[index] = PodResize(index, outcome, admission.message, desired, pod.cpu_actual)
        return out

    # ------------------------------------------------------------------ helpers
    def _cluster(self, name: str) -> SimCluster:
        cluster = self.clusters.get(name)
        if cluster is None:
            raise Rejected(f"MiniCluster {name!r} not found")
        return cluster

    def _pod_cpus(self, node: str) -> list[PodCpu]:
        """Every pod on a node as the node counts it (a refused resize keeps its desired value: the scheduler
        counts it, the kubelet's admission does not)."""
        return [
            PodCpu(f"{c.name}-{p.index}", p.cpu_desired, p.cpu_actual, p.cpu_actual)
            for c in self.clusters.values()
            for p in c.pods.values()
            if p.node == node
        ]

    def _grow(self, cluster: SimCluster, size: int) -> None:
        for index in range(cluster.size, size):
            node = self._place(cluster.cpu_per_pod)
            cluster.pods[index] = SimPod(index, node, cluster.cpu_per_pod, cluster.cpu_per_pod)
        cluster.size = size

    def _place(self, milli: int) -> str:
        """The first node whose free CPU (by the scheduler's count) fits the request, else the least used one."""
        best = None
        for node in self.nodes.values():
            free = node.allocatable_millicores - sum(c.counted for c in self._pod_cpus(node.name))
            if free >= milli:
                return node.name
            if best is None or free > best[0]:
                best = (free, node.name)
        assert best is not None
        return best[1]
