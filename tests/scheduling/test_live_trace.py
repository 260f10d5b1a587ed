"""A trace window scaled to a live run (elasticity/sim/live_trace.py), and the live timeline's segments."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from pathlib import Path

import pytest

from elasticity.figures.malleable import segments
from elasticity.sim.live_trace import scaled_window
from elasticity.sim.swf import SWFTrace, read_swf


@pytest.fixture
def sdsc(shared_trace: Callable[[str], Path]) -> SWFTrace:
    return read_swf(shared_trace("sdsc"))


def test_the_window_keeps_order_and_is_scaled_to_nodes_and_minutes(sdsc: SWFTrace) -> None:
    trace = sdsc
    window = scaled_window(trace, jobs=16, first=5, nodes=8, arrivals=60.0, median_runtime=40.0,
                           runtime_min=10.0, runtime_max=120.0)  # fmt: skip
    jobs = window.jobs
    assert len(jobs) == 16 and window.nodes == 8
    assert [j.submit for j in jobs] == sorted(j.submit for j in jobs)
    assert jobs[0].submit == 0.0 and jobs[-1].submit == pytest.approx(60.0)
    assert all(1 <= j.size.pref <= 8 and j.size.min == j.size.max == j.size.pref for j in jobs)
    assert all(10.0 <= j.runtime <= 120.0 and j.estimate >= j.runtime for j in jobs)
    assert statistics.median(j.runtime for j in jobs) == pytest.approx(40.0, rel=0.35)
    assert any("scaled from 128 to 8 nodes" in note for note in window.notes)


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"jobs": 0}, "need jobs >= 1"),
        ({"runtime_min": 50.0}, "runtime_min <= median_runtime"),
        ({"first": 10**7}, "cannot take 16"),
    ],
)
def test_an_impossible_window_is_refused(options: dict, words: str, sdsc: SWFTrace) -> None:
    with pytest.raises(ValueError, match=words):
        scaled_window(sdsc, **options)


def test_segments_are_the_stretches_a_job_held_nodes() -> None:
    assert segments([(0.0, 4), (10.0, 2), (15.0, 2), (20.0, 0)]) == [(0.0, 10.0, 4), (10.0, 15.0, 2), (15.0, 20.0, 2)]
    assert segments([(5.0, 0)]) == []
