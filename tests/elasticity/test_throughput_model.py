"""The multiplexing throughput model: hand-computed values, the fit's properties, knee and best N."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from elasticity.model.throughput import (
    Geometry,
    ThroughputModel,
    best_n,
    beta_from_pair,
    fit_beta,
    knee,
    measured_theta,
    predictions,
    stretch,
)
from miniclusters.cli import main

PAPER = Geometry(ranks=16, nodes=12, cores=8)  # REFERENCE.md section 6: 16 ranks on 12 x 8 vCPU


def test_rho_and_extra_load_by_hand() -> None:
    g = Geometry(ranks=4, nodes=2, cores=2)
    assert g.rho(1) == 1.0 and g.rho(3) == 3.0
    assert g.extra_load(1) == 0.0 and g.extra_load(2) == 1.0


def test_one_pair_gives_beta_exactly() -> None:
    # T2/T1 = 1.125 with rho_2 - rho_1 = 16/96 = 1/6  ->  beta = 0.125 * 6 = 0.75
    model = fit_beta([100.0, 112.5], PAPER)
    assert model.beta == pytest.approx(0.75)
    assert model.beta_stderr == 0.0
    assert model.theta(2) == pytest.approx(2 / 1.125)
    assert model.makespan(2) == pytest.approx(112.5)
    assert beta_from_pair(100.0, 112.5, PAPER) == pytest.approx(0.75)


def test_least_squares_by_hand() -> None:
    # x = 1, 2 (R/(MC) = 1); y = 0.2, 0.6  ->  beta = (0.2 + 1.2) / 5 = 0.28
    # residuals 0.2-0.28=-0.08, 0.6-0.56=0.04: s^2 = 0.008/1, se = sqrt(0.008/5) = 0.04
    g = Geometry(ranks=2, nodes=1, cores=2)
    model = fit_beta([10.0, 12.0, 16.0], g)
    assert model.beta == pytest.approx(0.28)
    assert model.beta_stderr == pytest.approx(0.04)
    assert model.theta(3) == pytest.approx(3 / 1.56)
    assert model.slowdown(2) == pytest.approx(1.28)


def test_demand_past_saturation_by_hand() -> None:
    # bench_multiplex: 4 ranks on 2 pods of 1 core, mean duty 0.24 -> u = 0.96 / 2 = 0.48
    g = Geometry(ranks=4, nodes=2, cores=1)
    u = g.demand([0.24] * 4)
    assert u == pytest.approx(0.48)
    model = fit_beta([55.6, 67.7], g, u)
    # N = 2 wants 0.96 of the cores: no stretch, so beta is the paper's: (67.7 / 55.6 - 1) / (4 - 2)
    assert stretch(2, u) == 1.0
    assert model.beta == pytest.approx((67.7 / 55.6 - 1) / 2)
    assert model.beta == fit_beta([55.6, 67.7], g).beta
    # N = 3 wants 1.44: T_3 / T_1 = 1.44 + beta (6 - 2), Theta(3) = 1.60 where the line says 2.09
    assert stretch(3, u) == pytest.approx(1.44)
    assert model.theta(3) == pytest.approx(3 / (1.44 + 4 * model.beta))
    assert model.theta(3) == pytest.approx(1.600, abs=0.001)
    assert fit_beta([55.6, 67.7], g).theta(3) == pytest.approx(2.090, abs=0.001)
    assert predictions(model, [3])[0]["stretch"] == pytest.approx(1.44)


def test_stretch_taken_out_before_the_fit() -> None:
    # u = 0.75 (2 cores, duty 0.75 each of 2 ranks): S_2 = 1.5, S_3 = 2.25; measured y = 0.7, 1.65 over S
    # leaves 0.2, 0.4 at x = 1, 2: beta = (0.2 + 0.8) / 5 = 0.2, residuals 0 -> stderr 0
    g = Geometry(ranks=2, nodes=1, cores=2)
    model = fit_beta([10.0, 17.0, 26.5], g, g.demand([0.75, 0.75]))
    assert model.demand == pytest.approx(0.75)
    assert model.beta == pytest.approx(0.2)
    assert model.beta_stderr == pytest.approx(0.0, abs=1e-12)
    # makespans that contradict the demand lower it: N = 2 ran at T_1's pace, so u <= 1/2
    contradicted = fit_beta([10.0, 10.0, 16.0], g, 0.75)
    assert contradicted.demand == pytest.approx(0.5)
    assert stretch(2, contradicted.demand) == 1.0
    # a simulation that alone wants more than the cores gains nothing from company: S_N = N
    alone_saturated = ThroughputModel(0.0, 0.0, 1.0, g, demand=1.5)
    assert [alone_saturated.theta(n) for n in (1, 2, 5)] == pytest.approx([1.0, 1.0, 1.0])


def test_bad_demand_or_duty_names_it() -> None:
    g = Geometry(ranks=2, nodes=1, cores=2)
    with pytest.raises(ValueError, match="duty cycle of rank 1"):
        g.demand([0.5, 1.2])
    with pytest.raises(ValueError, match="at least one rank"):
        g.demand([])
    with pytest.raises(ValueError, match="CPU demand"):
        fit_beta([10.0, 12.0], g, -0.1)
    with pytest.raises(ValueError, match="CPU demand"):
        ThroughputModel(0.1, 0.0, 1.0, g, demand=math.nan)


def test_negative_estimate_is_clipped_to_zero() -> None:
    model = fit_beta([100.0, 90.0, 95.0], PAPER)
    assert model.beta == 0.0
    assert model.theta(4) == 4.0


@pytest.mark.parametrize(
    ("makespans", "reason"),
    [([100.0], "k >= 2"), ([100.0, 0.0], "N=2"), ([-1.0, 5.0], "N=1"), ([1.0, math.nan], "N=2")],
)
def test_bad_makespans_name_the_problem(makespans: list[float], reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        fit_beta(makespans, PAPER)


def test_bad_geometry() -> None:
    with pytest.raises(ValueError, match="cores"):
        Geometry(ranks=4, nodes=1, cores=0)
    with pytest.raises(ValueError, match="nodes"):
        Geometry(ranks=4, nodes=0, cores=2)


def test_knee_by_hand() -> None:
    # beta x_N = 0.1 (N-1): efficiency 1/(1+0.1(N-1)) >= 0.85  <=>  N - 1 <= 1.76  ->  knee 2
    model = ThroughputModel(beta=0.1, beta_stderr=0.0, t1=1.0, geometry=Geometry(1, 1, 1))
    assert knee(model) == 2
    assert knee(model, threshold=0.5) == 11  # N - 1 <= 10
    assert knee(ThroughputModel(0.0, 0.0, 1.0, Geometry(1, 1, 1)), n_max=9) == 9


def test_best_n_under_a_budget_by_hand() -> None:
    model = ThroughputModel(beta=0.1, beta_stderr=0.0, t1=1.0, geometry=Geometry(1, 1, 1))
    assert best_n(model, cpu_per_simulation_m=500, budget_m=2000) == 4  # Theta rises: as many as fit
    assert best_n(model, cpu_per_simulation_m=500, budget_m=2000, threshold=0.85) == 2
    assert best_n(model, cpu_per_simulation_m=3000, budget_m=2000) == 1
    steep = ThroughputModel(beta=2.0, beta_stderr=0.0, t1=1.0, geometry=Geometry(1, 1, 1))
    assert best_n(steep, 100, 10_000) == 1  # Theta(N) = N/(1+2(N-1)) falls: one at a time is best


positive_times = st.floats(min_value=0.1, max_value=1e5, allow_nan=False, allow_infinity=False)
geometries = st.builds(
    Geometry,
    ranks=st.integers(1, 64),
    nodes=st.integers(1, 16),
    cores=st.floats(min_value=0.5, max_value=64, allow_nan=False),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(positive_times, min_size=2, max_size=8), geometries)
def test_fit_never_negative_and_theta1_is_one(makespans: list[float], g: Geometry) -> None:
    model = fit_beta(makespans, g)
    assert model.beta >= 0
    assert model.beta_stderr >= 0
    assert model.theta(1) == 1.0
    assert model.makespan(1) == makespans[0]


@settings(max_examples=200, deadline=None)
@given(st.floats(0, 20), positive_times, geometries, st.integers(2, 8))
def test_fit_recovers_beta_from_model_makespans(beta: float, t1: float, g: Geometry, k: int) -> None:
    truth = ThroughputModel(beta, 0.0, t1, g)
    model = fit_beta([truth.makespan(n) for n in range(1, k + 1)], g)
    assert model.beta == pytest.approx(beta, rel=1e-9, abs=1e-9)
    assert model.beta_stderr == pytest.approx(0.0, abs=1e-6)


@settings(max_examples=200, deadline=None)
@given(st.floats(0, 20), st.floats(0, 3), positive_times, geometries, st.integers(2, 8))
def test_fit_recovers_beta_with_a_demand(beta: float, u: float, t1: float, g: Geometry, k: int) -> None:
    truth = ThroughputModel(beta, 0.0, t1, g, demand=u)
    model = fit_beta([truth.makespan(n) for n in range(1, k + 1)], g, u)
    assert model.beta == pytest.approx(beta, rel=1e-9, abs=1e-9)
    assert model.demand == u


@settings(max_examples=200, deadline=None)
@given(st.floats(0, 20), st.floats(0, 3), geometries, st.integers(1, 30))
def test_demand_only_ever_lowers_theta(beta: float, u: float, g: Geometry, n: int) -> None:
    line = ThroughputModel(beta, 0.0, 10.0, g)
    model = ThroughputModel(beta, 0.0, 10.0, g, demand=u)
    assert model.theta(n) <= line.theta(n) + 1e-9
    assert model.efficiency(n + 1) <= model.efficiency(n) + 1e-12
    if n * u <= 1:  # below saturation it is the paper's model exactly
        assert model.theta(n) == pytest.approx(line.theta(n))
    assert model.theta(n) <= n / max(1.0, n * u / max(1.0, u)) + 1e-9  # never past the cores' share


@settings(max_examples=200, deadline=None)
@given(st.floats(0, 20), geometries, st.integers(1, 30))
def test_predictions_monotone(beta: float, g: Geometry, n: int) -> None:
    model = ThroughputModel(beta, 0.0, 10.0, g)
    assert model.makespan(n + 1) >= model.makespan(n)
    assert model.efficiency(n + 1) <= model.efficiency(n)
    assert model.theta(n) <= n + 1e-9
    # Theta rises with N exactly when beta R/(MC) < 1
    c = beta * g.ranks / (g.nodes * g.cores)
    if c < 1 - 1e-9:
        assert model.theta(n + 1) > model.theta(n)
    elif c > 1 + 1e-9:
        assert model.theta(n + 1) < model.theta(n)


@settings(max_examples=200, deadline=None)
@given(st.floats(0, 5), st.floats(0, 5), geometries, st.floats(0.3, 1.0))
def test_knee_falls_as_beta_or_threshold_rises(b1: float, b2: float, g: Geometry, threshold: float) -> None:
    lo, hi = sorted((b1, b2))
    k_lo = knee(ThroughputModel(lo, 0.0, 1.0, g), threshold)
    k_hi = knee(ThroughputModel(hi, 0.0, 1.0, g), threshold)
    assert k_hi <= k_lo
    model = ThroughputModel(lo, 0.0, 1.0, g)
    assert knee(model, min(1.0, threshold + 0.05)) <= knee(model, threshold)
    kn = knee(model, threshold)
    assert model.efficiency(kn) >= threshold - 1e-9
    if kn < 64:
        assert model.efficiency(kn + 1) < threshold


@settings(max_examples=200, deadline=None)
@given(st.floats(0, 5), geometries, st.floats(10, 4000), st.floats(0, 20000), st.floats(0, 20000))
def test_best_n_grows_with_the_budget(beta: float, g: Geometry, cpu: float, b1: float, b2: float) -> None:
    model = ThroughputModel(beta, 0.0, 1.0, g)
    small, large = sorted((b1, b2))
    n_small, n_large = best_n(model, cpu, small), best_n(model, cpu, large)
    assert n_small <= n_large
    assert n_large == 1 or n_large * cpu <= large + 1e-6


def test_measured_theta() -> None:
    assert measured_theta([100.0, 125.0, 150.0]) == pytest.approx([1.0, 1.6, 2.0])


# ---------------------------------------------------------------------------------------- CLI
def test_cli_json_matches_the_model() -> None:
    result = CliRunner().invoke(
        main, ["model", "fit", "--makespans", "10,12,16", "--ranks", "2", "--nodes", "1", "--cores", "2", "--json"]
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["beta"] == pytest.approx(0.28)
    assert out["beta_stderr"] == pytest.approx(0.04)
    assert out["knee"] == 1  # efficiency at N=2 is 1/1.28 = 78% < 85%
    assert [p["n"] for p in out["predictions"]] == [1, 2, 3]
    assert out["predictions"][2]["theta"] == pytest.approx(3 / 1.56)
    assert out["predictions"][1]["makespan"] == pytest.approx(12.8)


def test_cli_duty_predicts_past_saturation() -> None:
    args = ["model", "fit", "--makespans", "55.6,67.7", "--ranks", "4", "--nodes", "2", "--cores", "1"]
    line = json.loads(CliRunner().invoke(main, [*args, "--json", "--max-n", "3"]).output)
    result = CliRunner().invoke(main, [*args, "--duty", "0.24", "--json", "--max-n", "3", "--threshold", "0.5"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["demand"] == pytest.approx(0.48) and line["demand"] == 0.0
    assert out["beta"] == pytest.approx(line["beta"])
    theta3 = {p["n"]: p for p in out["predictions"]}[3]
    assert theta3["stretch"] == pytest.approx(1.44)
    assert theta3["theta"] == pytest.approx(1.600, abs=0.001)
    table = CliRunner().invoke(main, [*args, "--duty", "0.24", "--threshold", "0.5", "--max-n", "3"])
    assert "u=0.480 from duty 0.24" in table.output and "1.440" in table.output


def test_figure_with_a_demand_draws_the_cores_share() -> None:
    from elasticity.figures.throughput import build_throughput_figure

    g = Geometry(ranks=4, nodes=2, cores=1)
    fig = build_throughput_figure(fit_beta([55.6, 67.7], g, 0.48), [55.6, 67.7], n_max=4)
    lines = {line.get_label(): np.asarray(line.get_ydata()).tolist() for line in fig.axes[0].get_lines()}
    assert lines["the cores' share (u = 0.48)"] == pytest.approx([1.0, 2.0, 3 / 1.44, 4 / 1.92])
    assert lines["model"][2] == pytest.approx(1.600, abs=0.001)
    assert "u=0.48" in fig.axes[0].get_title()
    plain = build_throughput_figure(fit_beta([55.6, 67.7], g), [55.6, 67.7], n_max=4)
    assert not any("share" in str(line.get_label()) for line in plain.axes[0].get_lines())


def test_cli_table_and_plot(tmp_path) -> None:
    png = tmp_path / "theta.png"
    result = CliRunner().invoke(
        main,
        [
            "model",
            "fit",
            "--makespans",
            "100,112.5",
            "--ranks",
            "16",
            "--nodes",
            "12",
            "--cores",
            "8",
            "--plot",
            str(png),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "beta = 0.7500" in result.output
    assert "knee: N = 2" in result.output  # 1/(1+0.75 (N-1)/6) >= 0.85 <=> N <= 2.41
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (["--makespans", "100", "--cores", "8"], "k >= 2"),
        (["--makespans", "100,-5", "--cores", "8"], "must be a positive number"),
        (["--makespans", "100,0", "--cores", "8"], "must be a positive number"),
        (["--makespans", "100,abc", "--cores", "8"], "comma-separated"),
        (["--makespans", "100,120", "--cores", "0"], "--cores"),
        (["--makespans", "100,120", "--cores", "1", "--duty", "1.5"], "--duty"),
        (["--makespans", "100,120", "--cores", "1e-320"], "ranks per core"),  # was NaN for every Theta, exit 0
        (["--makespans", "100,120", "--cores", "1e308"], "ranks per core"),  # was a ZeroDivisionError traceback
        (["--makespans", "1e-320,120", "--cores", "1"], "too many times N=1's"),  # was beta inf, exit 0
        (["--makespans", "1e-300,120", "--cores", "1e9"], "no finite beta"),
    ],
)
def test_cli_bad_input_exits_2_with_the_reason(args: list[str], reason: str) -> None:
    result = CliRunner().invoke(main, ["model", "fit", "--ranks", "4", "--nodes", "2", *args])
    assert result.exit_code == 2
    assert reason in result.output
