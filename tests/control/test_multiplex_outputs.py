"""Progress parsing, the timeline figure and the summary rows of the multiplexing controller."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from elasticity.figures.timeline import timeline_rows, write_timeline
from miniclusters.multiplex.flux_simulations import last_iteration

EVENTS: list[Mapping[str, Any]] = [
    {"t": 0.0, "kind": "controller-start", "total_m": 2000},
    {"t": 0.0, "kind": "start", "sim": "sim1"},
    {"t": 1.0, "kind": "running", "sim": "sim1"},
    {"t": 2.0, "kind": "profiled", "sim": "sim1"},
    {"t": 2.0, "kind": "resize", "requests": {"0": 120, "1": 400}, "total_m": 520},
    {"t": 9.0, "kind": "start", "sim": "sim2"},
    {"t": 9.5, "kind": "running", "sim": "sim2"},
    {"t": 10.0, "kind": "resize-answer", "pod": 1, "answer": "deferred", "reason": "Node didn't have enough"},
    {"t": 12.0, "kind": "fairness", "receiver": "sim2", "donor": "sim1", "moved_m": 30},
    {"t": 20.0, "kind": "done", "sim": "sim1"},
    {"t": 25.0, "kind": "cancelled", "sim": "sim2", "reason": "partial deployment"},
]


def test_progress_lines() -> None:
    assert last_iteration("iteration 10\niteration 20\nnoise\n") == 20
    assert last_iteration("Time = 3\n\nsmoothSolver: ...\nTime = 4\n") == 4
    assert last_iteration("nothing here") is None


def test_timeline_rows_and_figure(tmp_path: Path) -> None:
    rows = timeline_rows(EVENTS)
    assert rows["sim1"] == {"start": 0.0, "running": 1.0, "profiled": 2.0, "end": 20.0, "end_kind": "done",
                            "fairness": [12.0]}  # fmt: skip
    assert rows["sim2"]["end_kind"] == "cancelled" and rows["sim2"]["fairness"] == [12.0]
    out = write_timeline(EVENTS, tmp_path / "t.png", allocatable_m=2000)
    assert out.read_bytes()[:4] == b"\x89PNG" and out.stat().st_size > 10_000
