"""The decision layer's models: one CPU mapping (and its value at 0), sizes, node admission."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elasticity.model import cpu
from elasticity.model.node import Node, PodCpu, Verdict, admit_resize, free_millicores
from elasticity.model.resources import cpu_millicores, format_millicores
from elasticity.model.size import removed_indexes, size_range


def test_weight_at_zero_is_the_kernels_minimum_under_every_formula() -> None:
    # 0 shares and a 0m request both run with the smallest weight a cgroup accepts (never 0).
    assert cpu.shares_to_weight_linear(0) == 1
    assert cpu.shares_to_weight_nonlinear(0) == 1
    assert cpu.milli_to_weight(0, "linear") == cpu.milli_to_weight(0, "nonlinear") == 1
    assert [cpu.kernel_weight(0, f) for f in cpu.FORMULAS] == [2, 1, 1]
    assert list(cpu.kernel_weights([0], "v2-linear")) == [1]


@given(st.integers(min_value=0, max_value=400_000), st.sampled_from(cpu.V2_FORMULAS))
def test_the_local_and_policy_names_are_one_mapping(milli: int, formula: str) -> None:
    assert cpu.milli_to_weight(milli, formula) == cpu.kernel_weight(milli, f"v2-{formula}")  # type: ignore[arg-type]
    assert 1 <= cpu.milli_to_weight(milli, formula) <= 10000


def test_resource_quantities_as_millicores() -> None:
    assert [cpu_millicores(q) for q in ("250m", "2", 1.5, "0.0001")] == [250, 2000, 1500, 1]
    assert [format_millicores(m) for m in (0, 250, 2000)] == ["0", "250m", "2"]
    with pytest.raises(ValueError, match="not a Kubernetes quantity"):
        cpu_millicores("two")


def test_size_range_keeps_the_lead_and_names_the_bound() -> None:
    allowed = size_range(0, 4)
    assert (allowed.minimum, allowed.maximum) == (1, 4)
    assert 0 not in allowed and 4 in allowed and True not in allowed
    assert "lead broker" in (allowed.violation(0) or "")
    assert "spec.maxSize=4" in (allowed.violation(5) or "")
    assert "spec.minSize=3" in (size_range(3, 4).violation(2, 3) or "")
    assert allowed.clamp(9) == 4 and allowed.clamp(-1) == 1
    assert removed_indexes(4, 2) == [2, 3] and removed_indexes(3, 0) == [1, 2]


def test_resize_admission_infeasible_deferred_accepted() -> None:
    node = Node("n", 2000)
    other = PodCpu("other", 1500, 1500, 1500)
    infeasible = admit_resize(node, 250, 64000, [other])
    assert infeasible.verdict == Verdict.INFEASIBLE and infeasible.reason == "Infeasible"
    assert infeasible.message == "Node didn't have enough capacity: cpu, requested: 64, capacity: 2"
    deferred = admit_resize(node, 250, 1000, [other])
    assert deferred.verdict == Verdict.DEFERRED and deferred.reason == "Deferred"
    assert "requested: 1, used: 1500m, capacity: 2" in deferred.message
    assert admit_resize(node, 250, 500, [other]).accepted
    # Shrinking always fits, even on an over-committed node.
    assert admit_resize(node, 1000, 900, [PodCpu("big", 1900, 1900, 1900)]).accepted


def test_scheduler_counts_max_of_desired_allocated_actual() -> None:
    # A lowered request frees headroom only once applied; a raised one reserves at once.
    shrinking = PodCpu("a", desired=100, allocated=1000, actual=1000)
    growing = PodCpu("b", desired=800, allocated=200, actual=200)
    assert shrinking.counted == 1000 and growing.counted == 800
    assert free_millicores(Node("n", 2000), [shrinking, growing]) == 200
    # The kubelet's admission counts what it committed to the others (not their pending requests).
    assert admit_resize(Node("n", 2000), 0, 1700, [growing]).accepted
