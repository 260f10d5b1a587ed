"""The pure ring-assignment math behind the concentric decomposition (no OpenFOAM needed)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elasticity.workloads.rings import (
    DEFAULT_WEIGHTS,
    concentric_assignment,
    grid_split,
    planar_distances,
    proportional_counts,
    ring_order,
)

weights_st = st.lists(st.floats(min_value=0.01, max_value=100.0), min_size=1, max_size=20)


@settings(max_examples=200, deadline=None)
@given(weights=weights_st, extra=st.integers(min_value=0, max_value=50_000))
def test_counts_are_proportional_and_exact(weights: list[float], extra: int) -> None:
    n = len(weights) + extra
    counts = proportional_counts(n, weights)
    assert counts.sum() == n
    assert counts.min() >= 1
    quota = n * np.asarray(weights) / sum(weights)
    # Within one cell of the exact share, except where the one-cell floor had to lift a tiny share.
    lifted = int((np.floor(quota) == 0).sum())
    assert np.all(np.abs(counts - quota) < 1 + lifted)


@settings(max_examples=200, deadline=None)
@given(weights=weights_st, extra=st.integers(min_value=0, max_value=5_000), seed=st.integers(0, 2**32 - 1))
def test_rings_are_contiguous_by_distance_heaviest_innermost(weights: list[float], extra: int, seed: int) -> None:
    n = len(weights) + extra
    distances = np.random.default_rng(seed).exponential(size=n)
    procs = concentric_assignment(distances, weights)
    assert procs.shape == (n,)
    np.testing.assert_array_equal(np.bincount(procs, minlength=len(weights)), proportional_counts(n, weights))
    order = ring_order(weights)
    # Ring k lies entirely inside ring k+1.
    for inner, outer in itertools.pairwise(order):
        assert distances[procs == inner].max() <= distances[procs == outer].min()
    # Heavier processors are never further out than lighter ones.
    w = np.asarray(weights)
    assert np.all(np.diff(w[order]) <= 0)


def test_default_weights_put_the_dense_ranks_at_the_wall() -> None:
    assert len(DEFAULT_WEIGHTS) == 16
    order = ring_order(DEFAULT_WEIGHTS)
    assert order.tolist() == [12, 13, 14, 15, 8, 9, 10, 11, 0, 1, 2, 3, 4, 5, 6, 7]
    counts = proportional_counts(16_000, DEFAULT_WEIGHTS)
    # 16000 / 88 = 181.8 per unit weight; the largest remainders (.82) go to the light ranks.
    assert counts.tolist() == [182] * 8 + [909] * 4 + [2727] * 4


def test_equal_distances_keep_cell_order() -> None:
    procs = concentric_assignment(np.zeros(6), [1, 2])
    assert procs.tolist() == [1, 1, 1, 1, 0, 0]


def test_planar_distance_ignores_the_extrusion_axis() -> None:
    centres = np.array([[0.5, -0.05, 0.0], [1.5, -0.09, 0.0], [0.5, 0.0, -2.0]])
    np.testing.assert_allclose(planar_distances(centres, (0.5, 0.0, 0.0)), [0.0, 1.0, 2.0])


@pytest.mark.parametrize(
    ("n", "split"), [(1, (1, 1, 1)), (4, (2, 1, 2)), (6, (3, 1, 2)), (7, (7, 1, 1)), (16, (4, 1, 4))]
)
def test_grid_split(n: int, split: tuple[int, int, int]) -> None:
    assert grid_split(n) == split


@pytest.mark.parametrize(
    ("n", "weights", "match"),
    [
        (3, [1, 1, 1, 1], "at least one cell"),
        (10, [], "non-empty"),
        (10, [1, 0], "positive"),
        (10, [1, float("nan")], "finite"),
    ],
)
def test_bad_inputs_are_refused(n: int, weights: list[float], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        proportional_counts(n, weights)
