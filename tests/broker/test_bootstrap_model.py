"""The bootstrap-time model (broker/bootstrap_model.py): tree depth as the broker builds it, and a fit that
recovers known coefficients and predicts beyond the sizes it saw."""

from __future__ import annotations

import pytest

from broker.bootstrap_model import BootstrapModel, Run, depth, features, fit, prediction_table, relative_error


@pytest.mark.parametrize(
    ("size", "fanout", "levels"),
    [(1, 2, 0), (2, 2, 1), (3, 2, 1), (4, 2, 2), (7, 2, 2), (8, 2, 3), (33, 32, 1), (34, 32, 2), (256, 0, 1)],
)
def test_depth_follows_the_k_ary_tree(size: int, fanout: int, levels: int) -> None:
    assert depth(size, fanout) == levels


def test_a_fit_recovers_the_coefficients_it_was_made_from_and_extrapolates() -> None:
    truth = BootstrapModel((0.3, 0.05, 0.2, 0.01, 0.001), ())
    runs = [Run(n, k, truth.predict(n, k)) for n in (16, 32, 64, 128, 256) for k in (2, 8, 32)]
    model = fit(runs)
    assert model.coefficients == pytest.approx(truth.coefficients, rel=1e-6, abs=1e-9)
    assert model.predict(4096, 32) == pytest.approx(truth.predict(4096, 32), rel=1e-6)
    assert max(abs(r) for r in model.residuals()) < 1e-9
    assert relative_error(model.predict(512, 8), truth.predict(512, 8)) == pytest.approx(0.0, abs=1e-9)
    assert prediction_table(model, [1024], [32])[0][0] == "kary:32"


def test_a_fit_refuses_too_few_runs_or_one_fan_out() -> None:
    with pytest.raises(ValueError, match="at least 5 runs"):
        fit([Run(16, 2, 1.0)])
    with pytest.raises(ValueError, match="two fan-outs"):
        fit([Run(n, 2, n / 10) for n in (16, 32, 64, 128, 256)])


def test_features_grow_with_size_and_cap_the_lead_s_children_at_the_fan_out() -> None:
    assert features(256, 32)[3] == 32 and features(16, 32)[3] == 15 and features(256, 0)[3] == 255


def test_no_cost_comes_out_negative_when_terms_trade_off() -> None:
    """Runs that grow with the size alone: the tree terms cannot explain anything, and none becomes a saving."""
    runs = [Run(n, k, 0.2 + 0.06 * n + (0.01 if k == 2 else -0.01)) for n in (16, 32, 64, 128, 256) for k in (2, 32)]
    model = fit(runs)
    assert all(value >= 0 for value in model.coefficients[1:])
    assert model.predict(512, 32) == pytest.approx(0.2 + 0.06 * 512, rel=0.05)
