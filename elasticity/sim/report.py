"""Tables and files from simulation rows (pure formatting; the CLI prints them)."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

from elasticity.sim.experiment import Row, Run

COLUMNS = (
    ("total_time", "total time (s)", "{:.0f}"),
    ("utilization", "util", "{:.3f}"),
    ("mean_wait", "wait (s)", "{:.0f}"),
    ("mean_run", "run (s)", "{:.0f}"),
    ("mean_turnaround", "turnaround (s)", "{:.0f}"),
    ("weighted_response", "w. response (s)", "{:.0f}"),
    ("weighted_completion", "w. completion (s)", "{:.0f}"),
    ("expands_per_job", "expands/job", "{:.2f}"),
    ("shrinks_per_job", "shrinks/job", "{:.2f}"),
)


def cells(row: Row) -> list[str]:
    """One table row: each metric as 'mean ± IQR' (the IQR over seeds)."""
    out = [row.policy, f"{row.malleable:g}%", str(int(row.mean["jobs"]))]
    for name, _, fmt in COLUMNS:
        value = fmt.format(row.mean[name])
        out.append(value if row.iqr[name] == 0 else f"{value} ±{fmt.format(row.iqr[name])}")
    return out


HEADERS = ["policy", "malleable", "jobs", *(label for _, label, _ in COLUMNS)]


def write_schedule(runs: Sequence[Run], path: Path) -> int:
    """One row per job and run: job,submit,start,end,nodes (final size),resizes, then which run it was."""
    count = 0
    with path.open("w", newline="") as handle:
        out = csv.writer(handle)
        out.writerow(["job", "submit", "start", "end", "nodes", "resizes", "policy", "malleable", "seed"])
        for run in runs:
            for rec in run.result.records:
                out.writerow(
                    [
                        rec.job,
                        f"{rec.submit:.3f}",
                        f"{rec.start:.3f}",
                        f"{rec.end:.3f}",
                        rec.nodes,
                        rec.expands + rec.shrinks,
                        run.policy,
                        f"{run.malleable:g}",
                        run.seed,
                    ]
                )
                count += 1
    return count
