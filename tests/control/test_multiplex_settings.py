"""spec.multiplexing -> the planner's config: the rigid allocation profiling starts from comes from the spec."""

from __future__ import annotations

from typing import Any, cast

from miniclusters.backends.base import ClusterStatus, PodStatus
from miniclusters.multiplex.settings import MultiplexSettings, equal_per_rank_m, multiplex_config, runner_cpu_m

SPEC: dict[str, Any] = {  # open: a MiniCluster mapping as a user writes it
    "apiVersion": "miniclusters.dev/v1alpha1",
    "kind": "MiniCluster",
    "metadata": {"name": "mux"},
    "spec": {
        "size": 2,
        "tasks": 4,
        "containers": [{"image": "local", "resources": {"requests": {"cpu": "1"}}}],
        "multiplexing": {"enabled": True, "command": "proxy_solver 10 64 8 1,1,1,4", "max": 2},
    },
}


def status(*requests: str) -> ClusterStatus:
    pods = tuple(PodStatus(i, f"mux-{i}", "Running", True, cpu_desired=r) for i, r in enumerate(requests))
    return ClusterStatus("mux", "default", len(pods), len(pods), len(pods), pods)


def test_a_controller_that_ran_before_does_not_shrink_the_next_ones_rigid_allocation() -> None:
    # the last controller left both pods at its overhead (200m each): profiling must still start from the
    # spec's 1 CPU per pod, i.e. (2 x 1000m - 2 x 200m) / 4 ranks = 400m per rank, not 1m
    left_over = status("200m", "200m")
    assert runner_cpu_m(SPEC) == 1000
    assert equal_per_rank_m(left_over, 4, 200, pod_cpu_m=1000) == 400
    settings = cast(MultiplexSettings, {**SPEC["spec"]["multiplexing"], "podCpuM": 1000})  # as the user wrote it
    config = multiplex_config(left_over, settings, 4, 2000)
    assert config.equal_per_rank_m == 400
    # without the spec's figure the current requests stand in (what a bare `--equal-cpu`-less call had)
    assert equal_per_rank_m(status("1000m", "1000m"), 4, 200) == 400
    assert equal_per_rank_m(left_over, 4, 200) == 1


def test_a_spec_without_a_cpu_request_gives_none() -> None:
    bare = {**SPEC, "spec": {**SPEC["spec"], "containers": [{"image": "local"}]}}
    assert runner_cpu_m(bare) is None
    assert runner_cpu_m({"kind": "not a MiniCluster"}) is None
