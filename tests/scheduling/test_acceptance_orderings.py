"""The papers' orderings, from the same policy functions the live loops call (fewer seeds than the bench).

`minicluster simulate` and bench/bench_simulate.py print the full tables (100 Jacobi seeds, 10 trace seeds).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from elasticity.sim.experiment import reduce, run_jacobi, run_trace
from elasticity.sim.swf import read_swf
from elasticity.sim.workload import from_swf


def test_jacobi_mixes_elastic_beats_moldable_and_moldable_beats_rigid_max() -> None:
    runs = run_jacobi(16, 90.0, ["elastic", "moldable", "rigid-max"], 30, slots=64, rescale_gap=60.0)
    rows = {row.policy: row.mean for row in reduce(runs)}
    assert rows["elastic"]["total_time"] < rows["moldable"]["total_time"]
    assert rows["elastic"]["utilization"] > rows["moldable"]["utilization"]
    assert rows["moldable"]["utilization"] > rows["rigid-max"]["utilization"]
    # Elastic really resizes; the others never do.
    assert rows["elastic"]["expands_per_job"] > 0 and rows["elastic"]["shrinks_per_job"] > 0
    assert rows["moldable"]["expands_per_job"] == rows["moldable"]["shrinks_per_job"] == 0


@pytest.mark.parametrize("key", ["sdsc", "hpc2n", "nasa", "lublin"])
def test_best_malleable_strategy_lowers_mean_turnaround_against_rigid_easy(
    key: str, shared_trace: Callable[[str], Path]
) -> None:
    base = from_swf(read_swf(shared_trace(key)))
    runs = run_trace(base, ["easy", "min", "avg", "pref", "keeppref"], [100.0], 1)
    rows = {row.policy: row.mean for row in reduce(runs)}
    best = min(rows[s]["mean_turnaround"] for s in ("min", "avg", "pref", "keeppref"))
    assert best < rows["easy"]["mean_turnaround"]
    assert rows["easy"]["expands_per_job"] == 0
    # Every job ran exactly once, and no policy ever used more nodes than the machine has.
    for run in runs:
        assert len(run.result.records) == len(base.jobs)
        assert all(r.start >= r.submit and r.end >= r.start for r in run.result.records)
        assert max(nodes for _, nodes in run.result.busy) <= base.nodes
