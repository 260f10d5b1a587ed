"""Per-pod CPU requests when several simulations share a MiniCluster's pods (pure).

A pod's request is the sum of the needs of the ranks placed on it, from every simulation on that pod
(REFERENCE.md section 6: need_i = d_i r_i, the CPU rank i keeps busy). Inside the pod each simulation's ranks get
a child cgroup whose weight follows that simulation's share of the pod's need, so a dense simulation is not
starved by a sparse one that happens to share the pod. Requests only, never limits.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from elasticity.policy.fairness import FairnessStep


@dataclass(frozen=True)
class SimulationDemand:
    """What one simulation needs on each pod it runs on (millicores), and its fairness multiplier."""

    sim: str
    pod_need_m: Mapping[int, float]
    scale: float = 1.0

    def __post_init__(self) -> None:
        for pod, need in self.pod_need_m.items():
            if not (need >= 0 and math.isfinite(need)):
                raise ValueError(
                    f"simulation {self.sim!r}: need on pod {pod} must be a non-negative number, got {need}"
                )
        if not (self.scale >= 0 and math.isfinite(self.total_m)):
            raise ValueError(f"simulation {self.sim!r}: scale {self.scale} gives no finite total need")

    def on(self, pod: int) -> float:
        return self.pod_need_m.get(pod, 0.0) * self.scale

    @property
    def total_m(self) -> float:
        return sum(self.pod_need_m.values()) * self.scale


@dataclass(frozen=True)
class PodPlan:
    """Requests per pod and, inside each pod, the share (millicores) of every simulation on it."""

    requests_m: dict[int, int]
    job_shares_m: dict[int, dict[str, int]] = field(default_factory=dict)

    @property
    def total_m(self) -> int:
        return sum(self.requests_m.values())


def pod_need_from_ranks(rank_need_m: Sequence[float], placement: Mapping[int, Sequence[int]]) -> dict[int, float]:
    """pod index -> sum of the needs of the ranks it hosts (placement: pod index -> ranks)."""
    out: dict[int, float] = {}
    for pod, ranks in placement.items():
        for rank in ranks:
            if not 0 <= rank < len(rank_need_m):
                raise ValueError(f"pod {pod} hosts rank {rank}, but only ranks 0..{len(rank_need_m) - 1} were measured")
        out[pod] = float(sum(rank_need_m[r] for r in ranks))
    return out


def equal_demand(sim: str, placement: Mapping[int, Sequence[int]], per_rank_m: float) -> SimulationDemand:
    """Before profiling: every rank gets the same allocation (what a rigid launcher would request)."""
    return SimulationDemand(sim, {pod: per_rank_m * len(ranks) for pod, ranks in placement.items()})


def plan_pods(
    demands: Iterable[SimulationDemand],
    pods: Iterable[int],
    *,
    floor_m: int = 10,
    ceiling_m: Mapping[int, int] | None = None,
    overhead_m: int = 0,
) -> PodPlan:
    """Each pod's request = its own overhead (the broker) + the sum of its simulations' needs.

    At least floor_m, at most its ceiling. The overhead keeps the pod's broker responsive (heartbeats) when its
    ranks need almost nothing: weights are relative, and a pod weighted near zero beside a busy one starves.
    """
    if floor_m < 1:
        raise ValueError(f"floor must be at least 1m, got {floor_m}m")
    demands = list(demands)
    requests: dict[int, int] = {}
    shares: dict[int, dict[str, int]] = {}
    for pod in pods:
        on_pod = {d.sim: d.on(pod) for d in demands if d.on(pod) > 0}
        total = sum(on_pod.values())
        if not math.isfinite(total):
            raise ValueError(f"pod {pod}: the simulations' needs add up past any CPU request ({total}m)")
        request = max(floor_m, overhead_m + math.ceil(total - 1e-9))
        if ceiling_m is not None and pod in ceiling_m:
            request = min(request, max(floor_m, ceiling_m[pod]))
        requests[pod] = request
        if on_pod:
            jobs = max(1, request - overhead_m)
            shares[pod] = {sim: max(1, round(jobs * (need / total))) for sim, need in on_pod.items()}
    return PodPlan(requests, shares)


def apply_fairness(demands: Sequence[SimulationDemand], step: FairnessStep) -> list[SimulationDemand]:
    """Scale the receiver up and the donor down so `step.millicores` moves between their totals."""
    out = []
    for d in demands:
        total = d.total_m
        if d.sim == step.receiver and total > 0:
            out.append(_rescaled(d, total + step.millicores))
        elif d.sim == step.donor and total > 0:
            out.append(_rescaled(d, max(0.0, total - step.millicores)))
        else:
            out.append(d)
    return out


def _rescaled(demand: SimulationDemand, total_m: float) -> SimulationDemand:
    """The demand with the same spread over its pods and `total_m` in all.

    The profile stays as measured and the scale carries the change, unless the scale cannot: a need that rounds
    to nothing (2e-309m) raised by 100m is a factor past the largest float (it was inf, and the pod's request
    ceil(inf) raised). Then the profile's spread itself is kept, at scale total_m.
    """
    raw = sum(demand.pod_need_m.values())
    scale = total_m / raw
    if math.isfinite(scale):
        return SimulationDemand(demand.sim, demand.pod_need_m, scale)
    spread = {pod: need / raw for pod, need in demand.pod_need_m.items()}
    return SimulationDemand(demand.sim, spread, total_m / math.fsum(spread.values()))


def shrink_to_fit(plan: PodPlan, allocatable_m: Mapping[int, int]) -> PodPlan:
    """Cut each pod's request to what its node can give (a pod over its node's capacity is Infeasible)."""
    requests = {pod: min(m, allocatable_m.get(pod, m)) for pod, m in plan.requests_m.items()}
    shares = {}
    for pod, by_sim in plan.job_shares_m.items():
        total = sum(by_sim.values())
        scale = requests[pod] / total if total else 1.0
        shares[pod] = {sim: max(1, round(m * scale)) for sim, m in by_sim.items()}
    return PodPlan(requests, shares)
