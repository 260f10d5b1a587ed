"""spec.multiplexing (and the CLI's flags over it) -> the planner's MultiplexConfig, one way for every caller.

`minicluster multiplex`, the controller `minicluster up` starts and the operator's loop all build their config
here, so a spec means the same thing wherever its controller runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

from elasticity.control.multiplex_types import MultiplexConfig
from elasticity.model.resources import cpu_millicores
from miniclusters.backends.base import ClusterStatus

DEFAULT_MAX = 4
DEFAULT_POD_OVERHEAD_M = 200


def pods_request_m(status: ClusterStatus) -> int:
    """What the pods request now (their rigid allocation before the controller changes anything)."""
    return sum(cpu_millicores(p.cpu_desired) for p in status.pods if p.cpu_desired)


def equal_per_rank_m(status: ClusterStatus, ranks: int, overhead_m: int, pod_cpu_m: int | None = None) -> int:
    """The rigid allocation, less the brokers' overhead, shared among one simulation's ranks.

    The rigid allocation is what the spec requests per pod (`pod_cpu_m`), not what the pods request now: a
    controller that ran before leaves them at its last plan (its overhead alone once everything finished), and
    profiling against that would measure every rank's need as a sliver of it. Without the spec's figure, the
    pods' current requests stand in."""
    current = pod_cpu_m * len(status.pods) if pod_cpu_m else pods_request_m(status)
    return max(1, (current - overhead_m * len(status.pods)) // ranks) if current else 1000


class MultiplexSettings(TypedDict, total=False):
    """spec.multiplexing in its wire form (camelCase; unset or 0 means the default), the stored spec's figures the
    planner needs beside it (podCpuM, tasks, flavour, placementCpus), and the CLI's flags merged over both."""

    enabled: bool
    command: str
    max: int
    total: int
    ranks: int
    profileIterations: int
    profileTogether: int
    fairness: float
    efficiencyThreshold: float
    headroom: float
    boundary: str
    workdir: str
    podCpuM: int | None
    tasks: int
    flavour: str
    placementCpus: str


# open: a stored MiniCluster document (validated here)
def runner_cpu_m(spec: Mapping[str, Any]) -> int | None:
    """The CPU request of the container that runs the broker, from a MiniCluster's wire form; None if unset."""
    from miniclusters.api.spec import MiniCluster

    try:
        mc = MiniCluster.model_validate(spec)
        cpu = mc.spec.containers[mc.spec.flux_runner_index].resources.requests.get("cpu")
        return cpu_millicores(str(cpu)) if cpu is not None else None
    except ValueError:
        return None


def multiplex_config(
    status: ClusterStatus,
    mux: MultiplexSettings,
    tasks: int,
    allocatable_m: int,
    *,
    overhead_m: int = DEFAULT_POD_OVERHEAD_M,
    equal_m: int | None = None,
    fairness_interval: float = 5.0,
    start_timeout: float = 60.0,
    settle: float = 3.0,
    retries: int = 2,
) -> MultiplexConfig:
    """The config for `status`'s pods from spec.multiplexing in its wire form (camelCase keys; unset or 0 means
    the default). Raises ValueError naming the field for values the planner cannot work with."""
    if mux.get("placementCpus") == "exclusive":
        raise ValueError(
            "spec.placement.cpus is exclusive: these pods are pinned to their own whole cores (Guaranteed QoS), "
            "and multiplexing resizes and shares CPU in place, which pinning forbids; recreate the MiniCluster "
            "with cpus: shared to multiplex it"
        )
    ranks = int(mux.get("ranks") or tasks or status.size)
    max_n = int(mux.get("max") or DEFAULT_MAX)
    total = int(mux.get("total") or max_n)
    if total < max_n:
        raise ValueError(f"total {total} is below max {max_n}")
    together = int(mux.get("profileTogether") or 1)
    if together > max_n:
        raise ValueError(f"profileTogether {together} is above max {max_n}")
    nodes = len({p.node for p in status.pods if p.node}) or 1
    return MultiplexConfig(
        ranks=ranks,
        pods=tuple(p.index for p in status.pods),
        cores_per_node=allocatable_m / 1000 / nodes,
        nodes=status.size,
        max_simulations=max_n,
        total_simulations=total,
        profile_iterations=int(mux.get("profileIterations") or 50),
        profile_together=together,
        fairness=float(mux.get("fairness") or 1.10),
        efficiency_threshold=float(mux.get("efficiencyThreshold") or 0.85),
        headroom=float(mux.get("headroom") or 1.2),
        equal_per_rank_m=equal_m
        if equal_m is not None
        else equal_per_rank_m(status, ranks, overhead_m, int(mux.get("podCpuM") or 0) or None),
        fairness_interval=fairness_interval,
        start_timeout=start_timeout,
        pod_overhead_m=overhead_m,
        settle_time=settle,
        max_retries=retries,
    )
