"""Duty-cycle math on synthetic traces with hand-computed answers, plus property tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elasticity.profiling.duty_cycle import (
    analyze_job,
    analyze_rank,
    busy_time_in_windows,
    duty_cycle,
    merge_intervals,
    reclaimable_capacity,
    steady_duty_cycle,
    steady_skip,
)
from elasticity.profiling.trace import EVENT_DTYPE, RankTrace, encode_trace, parse_trace

CALLS = ("MPI_Barrier", "MPI_Allreduce", "MPI_Waitall")
BARRIER, ALLREDUCE, WAITALL = 0, 1, 2


def make_trace(events: list[tuple[int, int, int]], rank: int = 0, size: int = 1, t_init_end: int = 0) -> RankTrace:
    """A RankTrace through the real encoder and parser; events are (call, t_enter, t_exit) in ns."""
    ev = np.array(events, dtype=EVENT_DTYPE)
    data = encode_trace(rank, size, ev, CALLS, t_init_start=min(0, t_init_end), t_init_end=t_init_end)
    return parse_trace(data, Path(f"synthetic.{rank}.bin"))


def test_merge_intervals_joins_overlapping_and_touching_calls() -> None:
    starts, ends = merge_intervals(np.array([20, 0, 5, 30]), np.array([30, 10, 15, 31]))
    assert starts.tolist() == [0, 20] and ends.tolist() == [15, 31]
    s, e = merge_intervals(np.array([], dtype=np.int64), np.array([], dtype=np.int64))
    assert s.size == 0 and e.size == 0


def test_busy_time_is_clipped_to_each_window() -> None:
    got = busy_time_in_windows(np.array([2, 6]), np.array([4, 9]), np.array([0, 5, 3, 10]), np.array([5, 10, 7, 12]))
    assert got.tolist() == [2, 3, 2, 0]
    assert busy_time_in_windows(np.array([]), np.array([]), np.array([0]), np.array([5])).tolist() == [0]


def test_per_iteration_split_by_hand() -> None:
    # it 0: compute 0-6, Allreduce 6-9, Barrier 9-10           -> compute 6, MPI 4, d = 0.6
    # it 1: compute 10-18, Barrier 18-20                        -> compute 8, MPI 2, d = 0.8
    # it 2: compute 20-21, Waitall 21-25 with a nested Allreduce 22-24, Barrier 25-30
    #                                                           -> compute 1, MPI 9, d = 0.1
    trace = make_trace(
        [
            (ALLREDUCE, 6, 9),
            (BARRIER, 9, 10),
            (BARRIER, 18, 20),
            (WAITALL, 21, 25),
            (ALLREDUCE, 22, 24),
            (BARRIER, 25, 30),
            (ALLREDUCE, 31, 35),  # after the last boundary: teardown, not an iteration
        ]
    )
    r = analyze_rank(trace, skip_fraction=0.0)
    assert r.n_iterations == 3
    np.testing.assert_allclose(r.t_compute, np.array([6, 8, 1]) * 1e-9)
    np.testing.assert_allclose(r.t_mpi, np.array([4, 2, 9]) * 1e-9)
    np.testing.assert_allclose(r.duty, [0.6, 0.8, 0.1])
    assert r.steady_duty == pytest.approx(15 / 30)
    assert r.iteration_end.tolist() == [10, 20, 30]

    # Skipping the first third of the iterations drops iteration 0.
    assert analyze_rank(trace, skip_fraction=0.34).steady_duty == pytest.approx(9 / 20)
    # Only the first two iterations.
    assert analyze_rank(trace, skip_fraction=0.0, max_iterations=2).steady_duty == pytest.approx(14 / 20)
    # Another boundary call: Allreduce exits at 9, 24 and 35.
    alt = analyze_rank(trace, boundary_call="MPI_Allreduce", skip_fraction=0.0)
    assert alt.iteration_end.tolist() == [9, 24, 35]
    # [9, 24): Barriers 1 + 2, Waitall clipped to 21-24: 3; [24, 35): Waitall 1, Barrier 5, Allreduce 4.
    np.testing.assert_allclose(alt.t_mpi, np.array([3, 1 + 2 + 3, 1 + 5 + 4]) * 1e-9)


def test_first_iteration_starts_when_mpi_init_returns() -> None:
    trace = make_trace([(BARRIER, 150, 200)], t_init_end=100)
    r = analyze_rank(trace, skip_fraction=0.0)
    assert r.t_compute.tolist() == pytest.approx([50e-9]) and r.t_mpi.tolist() == pytest.approx([50e-9])


def test_per_call_breakdown_covers_the_steady_state() -> None:
    trace = make_trace([(ALLREDUCE, 6, 9), (BARRIER, 9, 10), (ALLREDUCE, 12, 18), (BARRIER, 18, 20)])
    r = analyze_rank(trace, skip_fraction=0.5)
    assert r.skipped == 1
    assert r.mpi_by_call == pytest.approx({"MPI_Allreduce": 6e-9, "MPI_Barrier": 2e-9})


def test_missing_boundary_call_is_explained() -> None:
    trace = make_trace([(ALLREDUCE, 1, 2), (ALLREDUCE, 3, 4)])
    with pytest.raises(ValueError, match=r"never called MPI_Barrier.*MPI_Allreduce=2"):
        analyze_rank(trace)
    with pytest.raises(ValueError, match="not an intercepted call"):
        analyze_rank(trace, boundary_call="MPI_Fancy")


def test_steady_skip_counts() -> None:
    assert [steady_skip(n, 0.1) for n in (0, 1, 5, 9, 10, 19, 20, 50)] == [0, 0, 0, 0, 1, 1, 2, 5]
    assert steady_skip(3, 0.9) == 2  # always keeps one iteration
    with pytest.raises(ValueError):
        steady_skip(10, 1.0)


def test_duty_cycle_of_an_empty_iteration_is_nan() -> None:
    d = duty_cycle(np.array([1.0, 0.0]), np.array([3.0, 0.0]))
    assert d[0] == 0.25 and np.isnan(d[1])


def test_job_reclaimable_capacity() -> None:
    traces = [
        make_trace([(BARRIER, 8, 10), (BARRIER, 18, 20)], rank=0, size=2),
        make_trace([(BARRIER, 2, 10), (BARRIER, 12, 20)], rank=1, size=2),
    ]
    a = analyze_job(traces, skip_fraction=0.0, allocation_millicores=[1000, 500])
    np.testing.assert_allclose(a.duty, [0.8, 0.2])
    np.testing.assert_allclose(a.reclaimable_millicores, [200, 400])
    assert a.total_reclaimable_millicores == pytest.approx(600)
    assert a.iterations == (2, 2)
    np.testing.assert_allclose(reclaimable_capacity(0.25, 1000.0), 750.0)


def test_steady_rate_is_the_slowest_ranks_pace_after_the_skipped_iterations() -> None:
    # rank 0: iterations end at 10, 20, 40, 60 ns; rank 1 at 10, 20, 50, 80 ns
    traces = [
        make_trace([(BARRIER, 8, 10), (BARRIER, 18, 20), (BARRIER, 38, 40), (BARRIER, 58, 60)], rank=0, size=2),
        make_trace([(BARRIER, 8, 10), (BARRIER, 18, 20), (BARRIER, 48, 50), (BARRIER, 78, 80)], rank=1, size=2),
    ]
    # skipping half: rank 0 runs 2 iterations in 40 ns, rank 1 in 60 ns; the job goes at the slower pace
    assert analyze_job(traces, skip_fraction=0.5).steady_rate == pytest.approx(2 / 60e-9)
    assert analyze_job(traces, skip_fraction=0.0).steady_rate == pytest.approx(4 / 80e-9)


iteration_st = st.tuples(
    st.integers(0, 10_000),  # compute before the first call
    st.lists(
        st.tuples(st.sampled_from([ALLREDUCE, WAITALL]), st.integers(0, 5_000), st.integers(0, 5_000)), max_size=4
    ),
    st.integers(0, 5_000),  # barrier duration
)


@settings(max_examples=150, deadline=None)
@given(st.lists(iteration_st, min_size=1, max_size=25), st.sampled_from([0.0, 0.1, 0.25]))
def test_synthetic_iterations_are_recovered_exactly(
    iterations: list[tuple[int, list[tuple[int, int, int]], int]], skip: float
) -> None:
    events: list[tuple[int, int, int]] = []
    t = 0
    want_comp, want_mpi = [], []
    for compute, calls, barrier in iterations:
        comp, mpi = compute, barrier
        t += compute
        for call, dur, gap in calls:
            events.append((call, t, t + dur))
            t += dur + gap
            comp += gap
            mpi += dur
        events.append((BARRIER, t, t + barrier))
        t += barrier
        want_comp.append(comp)
        want_mpi.append(mpi)
    r = analyze_rank(make_trace(events), skip_fraction=skip)
    assert r.n_iterations == len(iterations)
    np.testing.assert_allclose(r.t_compute, np.array(want_comp) * 1e-9, atol=1e-15)
    np.testing.assert_allclose(r.t_mpi, np.array(want_mpi) * 1e-9, atol=1e-15)
    k = steady_skip(len(iterations), skip)
    total = sum(want_comp[k:]) + sum(want_mpi[k:])
    if total:
        assert r.steady_duty == pytest.approx(sum(want_comp[k:]) / total)
        assert 0.0 <= r.steady_duty <= 1.0
    assert r.steady_duty == pytest.approx(steady_duty_cycle(r.t_compute, r.t_mpi, skip), nan_ok=True)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 150), st.integers(0, 40)), max_size=12),
    st.lists(st.tuples(st.integers(0, 200), st.integers(0, 200)), min_size=1, max_size=6),
)
def test_busy_time_matches_a_brute_force_union(
    intervals: list[tuple[int, int]], windows: list[tuple[int, int]]
) -> None:
    enter = np.array([a for a, _ in intervals], dtype=np.int64)
    exit_ = np.array([a + d for a, d in intervals], dtype=np.int64)
    ws = np.array([min(a, b) for a, b in windows], dtype=np.int64)
    we = np.array([max(a, b) for a, b in windows], dtype=np.int64)
    covered = np.zeros(400, dtype=bool)
    for a, b in zip(enter, exit_, strict=True):
        covered[a:b] = True
    want = [int(covered[a:b].sum()) for a, b in zip(ws, we, strict=True)]
    assert busy_time_in_windows(enter, exit_, ws, we).tolist() == want
