"""Denormal, tiny and huge numbers in the pure model and policies: a valid answer or a ValueError naming the input.

hypothesis found allocate_pod_requests([0.0, 2.2e-309], ...) giving -2**63 millicores (a budget's water-filling
multiplier overflowed to inf; 0 * inf is NaN). The same shapes (a quotient by a tiny total, floor/ceil/int of
inf or NaN) were in the Amdahl size range, best N under a budget, the throughput geometry and fit, the fairness
step and its rescaling of demands, and the nice-level mapping.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import example, given, note, settings
from hypothesis import strategies as st

from elasticity.model.cpu import NICE_MIN, nice_to_milli
from elasticity.model.speedup import Amdahl, JobSize, size_range
from elasticity.model.throughput import Geometry, ThroughputModel, best_n, fit_beta
from elasticity.policy.cpu_allocation import water_fill
from elasticity.policy.fairness import FairnessStep, fairness_step, progress_ratio
from elasticity.policy.multiplex_requests import SimulationDemand, apply_fairness, plan_pods

TINY = (5e-324, 2.2e-309, 1e-300, 1e-200, 1e-20)
extreme = st.one_of(st.floats(0.0, 4000.0, allow_nan=False), st.sampled_from((0.0, *TINY)))


def test_water_fill_past_the_largest_multiplier() -> None:
    # pod 1 reaches its ceiling at lam = 1000; pod 0 needs lam = 3e322 (past the largest float) for its 500m
    x = water_fill(np.array([1e-320, 1.0]), np.array([200.0, 200.0]), np.array([1000.0, 1000.0]), 1500.0)
    np.testing.assert_allclose(x, [500.0, 1000.0])
    y = water_fill(np.array([0.0, 2.2e-309]), np.array([200.0, 200.0]), np.array([1000.0, 1000.0]), 1000.0)
    np.testing.assert_allclose(y, [200.0, 800.0])


@settings(max_examples=300, deadline=None)
@example([0.0, 2.2e-309], 200, 1000)
@example([1e-320, 1.0], 200, 1500)
@example([5e-324, 5e-324, 4000.0], 1, 2001)
@given(st.lists(extreme, min_size=1, max_size=10), st.integers(0, 200), st.integers(0, 20000))
def test_water_fill_is_a_proportional_fill_for_any_weights(weights: list[float], floor: int, budget: int) -> None:
    w = np.array(weights)
    lo = np.full(w.size, float(floor))
    hi = np.full(w.size, 1000.0)
    note(f"water_fill(np.array({weights!r}), lo={floor}, hi=1000, budget={budget})")
    if budget < lo.sum():
        with pytest.raises(ValueError, match="below the sum of the pods' floors"):
            water_fill(w, lo, hi, float(budget))
        return
    x = water_fill(w, lo, hi, float(budget))
    note(f"-> {x.tolist()}")
    assert np.all(np.isfinite(x)) and np.all(x >= lo) and np.all(x <= hi), x
    reachable = np.where(w > 0, hi, lo).sum()
    assert x.sum() == pytest.approx(min(float(budget), reachable), abs=1e-6)
    assert np.all(x[w == 0] == lo[w == 0])  # a share of nothing is nothing
    order = np.argsort(w, kind="stable")
    assert np.all(np.diff(x[order]) >= -1e-9)  # more weight never gets less


def test_size_range_with_a_denormal_serial_fraction_or_threshold() -> None:
    # s = 5e-324 scales perfectly: every size is efficient (floor((1/e - 1 + s) / s) was floor(inf))
    assert size_range(Amdahl(5e-324), 2, 8) == JobSize(1, 2, 8)
    assert size_range(Amdahl(0.5), 2, 8, efficiency_threshold=5e-324) == JobSize(1, 2, 8)
    with pytest.raises(ValueError, match="efficiency threshold"):
        size_range(Amdahl(0.5), 2, 8, efficiency_threshold=0.0)
    with pytest.raises(ValueError, match="max slowdown"):
        size_range(Amdahl(0.5), 2, 8, max_slowdown=math.nan)


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.floats(0.0, 1.0), st.sampled_from(TINY)), st.integers(1, 64), st.integers(64, 512))
def test_size_range_always_holds_the_request(s: float, requested: int, machine: int) -> None:
    sizes = size_range(Amdahl(s), requested, machine)
    assert 1 <= sizes.min <= requested == sizes.pref <= sizes.max <= machine


def test_best_n_with_a_tiny_request_or_no_budget() -> None:
    model = ThroughputModel(beta=0.1, beta_stderr=0.0, t1=1.0, geometry=Geometry(1, 1, 1))  # Theta rises with N
    assert best_n(model, 5e-324, 1000) == 64  # room = inf was floor(inf)
    assert best_n(model, 100, math.inf) == 64
    with pytest.raises(ValueError, match="CPU budget"):
        best_n(model, 100, math.nan)
    with pytest.raises(ValueError, match="CPU per simulation"):
        best_n(model, math.inf, 1000)


def test_geometry_and_fit_refuse_what_no_float_can_hold() -> None:
    with pytest.raises(ValueError, match="ranks per core"):
        Geometry(2, 1, 5e-324)  # rho infinite: beta came out 0 and every Theta NaN
    with pytest.raises(ValueError, match="ranks per core"):
        Geometry(2, 2, 1e308)  # rho 0: float division by zero in the fit
    with pytest.raises(ValueError, match="too many times N=1's"):
        fit_beta([5e-324, 1.5], Geometry(2, 1, 4))  # T2/T1 infinite: beta inf, Theta(1) NaN
    with pytest.raises(ValueError, match="no finite beta"):
        fit_beta([1e-300, 1.5], Geometry(2, 1, 1e10))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.floats(1e-300, 1e300), min_size=2, max_size=5),
    st.integers(1, 10**6),
    st.integers(1, 10**6),
    st.floats(1e-6, 1e6),
)
def test_fit_is_finite_or_refused(makespans: list[float], ranks: int, nodes: int, cores: float) -> None:
    try:
        geometry = Geometry(ranks, nodes, cores)
        model = fit_beta(makespans, geometry)
    except ValueError as exc:
        note(str(exc))
        return
    values = [model.beta, model.beta_stderr, *(model.theta(n) for n in (1, 2, 64))]
    assert all(math.isfinite(v) for v in values), values
    assert model.theta(1) == pytest.approx(1.0)


def test_fairness_rescales_a_demand_of_almost_nothing() -> None:
    tiny = SimulationDemand("a", {0: 2.2e-309})
    moved = apply_fairness([tiny, SimulationDemand("b", {0: 500.0})], FairnessStep("a", "b", 100, 2.0))
    # the scale was 100 / 2.2e-309 = inf, and the pod's request ceil(inf) raised OverflowError
    assert [d.total_m for d in moved] == pytest.approx([100.0, 400.0])
    assert plan_pods(moved, [0]).requests_m == {0: 500}


@settings(max_examples=200, deadline=None)
@given(st.lists(extreme, min_size=1, max_size=4), st.integers(1, 4000))
def test_fairness_moves_exactly_the_step(needs: list[float], millicores: int) -> None:
    receiver = SimulationDemand("a", dict(enumerate(needs)))
    donor = SimulationDemand("b", {0: 4000.0})
    if receiver.total_m <= 0:
        return
    moved = apply_fairness([receiver, donor], FairnessStep("a", "b", millicores, 2.0))
    note(f"{moved}")
    assert moved[0].total_m == pytest.approx(receiver.total_m + millicores)
    assert moved[1].total_m == pytest.approx(max(0.0, 4000.0 - millicores))
    plan = plan_pods(moved, range(len(needs)))
    assert all(isinstance(m, int) and m >= 10 for m in plan.requests_m.values())


def test_demands_refuse_non_finite_needs() -> None:
    with pytest.raises(ValueError, match="'a': need on pod 0"):
        SimulationDemand("a", {0: math.nan})
    with pytest.raises(ValueError, match="'a': scale inf"):
        SimulationDemand("a", {0: 1.0}, scale=math.inf)
    with pytest.raises(ValueError, match="pod 0: the simulations' needs add up"):
        plan_pods([SimulationDemand("a", {0: 1e308}), SimulationDemand("b", {0: 1e308})], [0])


def test_fairness_ignores_rates_that_are_no_number() -> None:
    # two infinite paces compared made a NaN ratio, and a step with it
    assert fairness_step({"a": math.inf, "b": math.inf}, {"a": 100, "b": 100}) is None
    assert fairness_step({"a": 1.0, "b": 1.0}, {"a": 100, "b": 100}, reference={"a": 5e-324, "b": 5e-324}) is None
    assert progress_ratio({"a": math.inf, "b": 2.0, "c": 1.0}) == 2.0
    step = fairness_step({"a": 5e-324, "b": 1.0}, {"a": 100, "b": 100})  # a tiny pace is a real, slow one
    assert step is not None and step.receiver == "a" and step.millicores == 25


def test_nice_to_milli_clamps_to_the_kernels_range() -> None:
    assert nice_to_milli(-4000) == nice_to_milli(NICE_MIN)  # 1.25 ** 4000 overflowed
