"""Per-pod CPU requests: kernel weight formulas, floors/ceilings/budget/rounding, weight preservation."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, example, given, note, settings
from hypothesis import strategies as st

from elasticity.model.cpu import (
    FORMULAS,
    MAX_MILLICORES,
    kernel_weight,
    milli_to_shares,
    shares_to_weight_linear,
    shares_to_weight_nonlinear,
)
from elasticity.model.cpu import weight_table as _weight_table
from elasticity.model.resources import format_millicores as cpu_quantity
from elasticity.policy.cpu_allocation import (
    allocate_pod_requests,
    placement_from_hostnames,
    rank_needs_millicores,
    ratio_error,
)


def one_rank_pods(n: int) -> dict[str, list[int]]:
    return {f"pod-{i}": [i] for i in range(n)}


def test_kubelet_and_runtime_conversions() -> None:
    assert [milli_to_shares(m) for m in (0, 1, 2, 3, 100, 1000, 10**6)] == [2, 2, 2, 3, 102, 1024, 262144]
    assert shares_to_weight_linear(2) == 1 and shares_to_weight_linear(262144) == 10000
    assert shares_to_weight_linear(1024) == 39
    assert shares_to_weight_nonlinear(2) == 1 and shares_to_weight_nonlinear(262144) == 10000
    # REFERENCE.md section 4: under the new formula 1000m:100m gives 100:17, not 10:1.
    assert kernel_weight(1000, "v2-nonlinear") == 100
    assert kernel_weight(100, "v2-nonlinear") == 17
    assert kernel_weight(1000, "v1") == 1024 and kernel_weight(100, "v1") == 102
    with pytest.raises(ValueError, match="unknown weight formula"):
        kernel_weight(100, "v3")  # type: ignore[arg-type]


@pytest.mark.parametrize("formula", FORMULAS)
def test_vectorized_table_equals_the_scalar_formula(formula: str) -> None:
    table = _weight_table(formula)
    ms = np.unique(np.concatenate([np.arange(0, 3000), np.linspace(0, MAX_MILLICORES, 3000).astype(int)]))
    assert all(table[m] == kernel_weight(int(m), formula) for m in ms)  # type: ignore[arg-type]
    assert np.all(np.diff(table) >= 0)


def test_cpu_quantity() -> None:
    assert [cpu_quantity(m) for m in (0, 1, 250, 1000, 1500, 3000)] == ["0", "1m", "250m", "1", "1500m", "3"]
    with pytest.raises(ValueError):
        cpu_quantity(-1)


def test_rank_needs() -> None:
    np.testing.assert_allclose(rank_needs_millicores([0.05, 0.19, np.nan], 1000), [50, 190, 1000])
    np.testing.assert_allclose(rank_needs_millicores([0.5], [2000], headroom=1.2), [1200])
    with pytest.raises(ValueError):
        rank_needs_millicores([1.5])


def test_pod_request_is_the_sum_of_its_ranks_rounded_up_and_clamped() -> None:
    needs = [50.2, 190.0, 0.0, 700.0, 900.0]
    plan = allocate_pod_requests(needs, {"a": [0, 1], "b": [2], "c": [3, 4]}, floor_millicores=20)
    assert plan.requests() == {"a": 241, "b": 20, "c": 1600}
    assert [p.quantity for p in plan.pods] == ["241m", "20m", "1600m"]
    capped = allocate_pod_requests(needs, {"a": [0, 1], "c": [3, 4]}, ceiling_millicores=1000)
    assert capped.requests() == {"a": 241, "c": 1000}
    # Without a ceiling a pod never asks for more than one core per rank.
    assert allocate_pod_requests([1000.0, 1000.0], {"p": [0, 1]}, floor_millicores=10).requests() == {"p": 2000}
    assert plan.total_request_millicores == 241 + 20 + 1600


def test_budget_is_shared_proportionally() -> None:
    # The paper's shape: sparse ranks 5%, dense 19%, budget spread as r_i = B w_i / sum w.
    needs = [50.0] * 4 + [190.0] * 4
    plan = allocate_pod_requests(needs, one_rank_pods(8), budget_millicores=4800, floor_millicores=10)
    req = np.array(list(plan.requests().values()))
    assert req.sum() == 4800
    np.testing.assert_allclose(req, 4800 * np.array(needs) / sum(needs), atol=1)


def test_budget_water_fills_around_floor_and_ceiling() -> None:
    plan = allocate_pod_requests(
        [1.0, 100.0, 900.0], one_rank_pods(3), floor_millicores=50, ceiling_millicores=600, budget_millicores=1000
    )
    # pod-0 held at the floor, pod-2 at the ceiling; pod-1 takes what is left.
    assert plan.requests() == {"pod-0": 50, "pod-1": 350, "pod-2": 600}


def test_invalid_inputs_say_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="below the sum of the pods' floors"):
        allocate_pod_requests([1.0, 1.0], one_rank_pods(2), floor_millicores=100, budget_millicores=150)
    with pytest.raises(ValueError, match="ceiling 5m is below floor 10m"):
        allocate_pod_requests([1.0], one_rank_pods(1), ceiling_millicores=5)
    with pytest.raises(ValueError, match="rank 1 is placed in both pod 'a' and pod 'b'"):
        allocate_pod_requests([1.0, 2.0], {"a": [0, 1], "b": [1]})
    with pytest.raises(ValueError, match=r"only ranks 0\.\.1 were measured"):
        allocate_pod_requests([1.0, 2.0], {"a": [2]})
    with pytest.raises(ValueError, match="non-negative"):
        allocate_pod_requests([-1.0], {"a": [0]})
    with pytest.raises(ValueError, match="unknown mode"):
        allocate_pod_requests([1.0], {"a": [0]}, mode="fair")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least 1m"):
        allocate_pod_requests([1.0], {"a": [0]}, floor_millicores=0)


def test_weight_preserving_fixes_the_1000_to_100_example() -> None:
    naive = allocate_pod_requests([1000.0, 100.0], one_rank_pods(2), mode="proportional")
    assert [p.kernel_weight for p in naive.pods] == [100, 17]  # 5.9:1 instead of 10:1
    assert naive.ratio_error > 0.5
    fixed = allocate_pod_requests([1000.0, 100.0], one_rank_pods(2), mode="weight-preserving")
    w = [p.kernel_weight for p in fixed.pods]
    assert w[0] / w[1] == pytest.approx(10.0, rel=0.05)
    assert fixed.ratio_error < 0.05 and fixed.proportional_ratio_error == pytest.approx(naive.ratio_error)
    assert fixed.total_request_millicores <= naive.total_request_millicores


def test_under_cgroup_v1_proportional_requests_already_keep_the_ratios() -> None:
    plan = allocate_pod_requests([1000.0, 100.0, 400.0], one_rank_pods(3), formula="v1")
    assert plan.ratio_error < 0.01


def test_placement_from_hostnames() -> None:
    assert placement_from_hostnames(["mc-0", "mc-0", "mc-1", "mc-0"]) == {"mc-0": [0, 1, 3], "mc-1": [2]}


@pytest.mark.parametrize("mode", ["proportional", "weight-preserving"])
def test_a_subnormal_need_under_a_budget_gets_the_rest_of_the_budget(mode: str) -> None:
    """Regression: a subnormal need (2.2e-309) once overflowed the water-filling multiplier to inf,
    and 0 * inf = NaN cast to int64 gave -9223372036854775808 millicores."""
    plan = allocate_pod_requests(
        [0.0, 2.2e-309],
        one_rank_pods(2),
        floor_millicores=200,
        budget_millicores=1000,
        mode=mode,  # type: ignore[arg-type]
    )
    assert plan.requests() == {"pod-0": 200, "pod-1": 800}
    assert plan.total_request_millicores == 1000
    assert all(np.isfinite(p.target_millicores) for p in plan.pods)


needs_st = st.lists(st.floats(0.0, 4000.0, allow_nan=False), min_size=1, max_size=12)


@settings(max_examples=150, deadline=None)
@example([0.0, 2.2e-309], 200, None, 1000, "proportional", "v2-nonlinear")  # was -9223372036854775808m
@example([0.0, 2.2e-309], 200, None, 1000, "weight-preserving", "v2-nonlinear")  # raised
@example([5e-324, 1e-300, 4000.0], 1, None, 3000, "proportional", "v1")
@example([2.2e-309, 2.2e-309], 1, None, 40000, "weight-preserving", "v2-linear")
@given(
    needs_st,
    st.integers(1, 200),
    st.one_of(st.none(), st.integers(200, 5000)),
    st.one_of(st.none(), st.integers(0, 40000)),
    st.sampled_from(["proportional", "weight-preserving"]),
    st.sampled_from(FORMULAS),
)
def test_allocation_invariants(
    needs: list[float], floor: int, ceiling: int | None, budget: int | None, mode: str, formula: str
) -> None:
    n = len(needs)
    if budget is not None:
        assume(budget >= floor * n)
    note(
        f"allocate_pod_requests({needs!r}, one_rank_pods({n}), floor_millicores={floor}, ceiling_millicores={ceiling}, "
        f"budget_millicores={budget}, mode={mode!r}, formula={formula!r})"
    )
    plan = allocate_pod_requests(
        needs,
        one_rank_pods(n),
        floor_millicores=floor,
        ceiling_millicores=ceiling,
        budget_millicores=budget,
        mode=mode,  # type: ignore[arg-type]
        formula=formula,  # type: ignore[arg-type]
    )
    req = np.array([p.request_millicores for p in plan.pods])
    note(f"requests: {req.tolist()}, targets: {[p.target_millicores for p in plan.pods]}")
    hi = ceiling if ceiling is not None else max(floor, 1000)
    assert req.dtype.kind == "i"
    assert np.all(req >= floor) and np.all(req <= hi), f"requests {req.tolist()} outside [{floor}, {hi}]m"
    assert all(floor <= p.target_millicores <= hi for p in plan.pods)
    assert [p.kernel_weight for p in plan.pods] == [kernel_weight(int(m), formula) for m in req]  # type: ignore[arg-type]
    if budget is not None:
        assert req.sum() <= budget
    assert plan.ratio_error <= plan.proportional_ratio_error + 1e-12
    if mode == "proportional":
        if budget is None:
            # Never below what the ranks need (up to the ceiling), never a whole millicore above.
            want = np.clip(np.ceil(np.array(needs) - 1e-9), floor, hi)
            assert req.tolist() == want.astype(int).tolist()
        elif budget <= sum(hi if x > 0 else floor for x in needs):
            assert req.sum() == budget  # the whole budget is handed out (zero need gets only the floor)
        for i in range(n):  # more need never gets less CPU
            assert all(req[i] >= req[j] for j in range(n) if needs[i] > needs[j] + 1e-6)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(20, 1000), min_size=2, max_size=8))
def test_weight_preserving_beats_naive_under_the_new_formula(needs: list[int]) -> None:
    assume(max(needs) >= 2 * min(needs))
    naive = allocate_pod_requests(needs, one_rank_pods(len(needs)), formula="v2-nonlinear")
    fixed = allocate_pod_requests(needs, one_rank_pods(len(needs)), formula="v2-nonlinear", mode="weight-preserving")
    assert fixed.ratio_error < naive.ratio_error
    assert fixed.total_request_millicores <= naive.total_request_millicores
    assert ratio_error([p.request_millicores for p in fixed.pods], needs, "v2-nonlinear") == pytest.approx(
        fixed.ratio_error
    )
