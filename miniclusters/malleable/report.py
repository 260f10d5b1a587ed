"""A live malleable run's tables (pure rendering): one row per job, then the run's figures beside the
simulator's prediction for the same workload and policy."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from elasticity.control.malleable import MalleableLoop
from elasticity.sim.engine import JobRecord, SimResult
from elasticity.sim.metrics import summarize

JOB_HEADER = ("job", "size [min,pref,max]", "submit", "start", "end", "wait", "turnaround", "nodes", "resizes",
              "answer")  # fmt: skip


def _seconds(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.1f}"


def job_rows(
    records: Sequence[JobRecord],
    names: Sequence[str],
    sizes: Sequence[str],
    answers: Mapping[str, tuple[str | None, str | None]],
    reasons: Mapping[str, str],
) -> list[list[str]]:
    rows = []
    for record, name, size in zip(records, names, sizes, strict=True):
        got, want = answers.get(name, (None, None))
        answer = reasons.get(name) or ("= rigid" if got and got == want else f"{got} != rigid {want}")
        rows.append([
            name, size, _seconds(record.submit), _seconds(record.start), _seconds(record.end),
            _seconds(record.start - record.submit), _seconds(record.end - record.submit), str(record.nodes),
            f"+{record.expands} -{record.shrinks}", answer,
        ])  # fmt: skip
    return rows


def table(rows: Sequence[Sequence[str]], header: Sequence[str]) -> list[str]:
    cells = [list(header), *[list(r) for r in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]


def makespan(result: SimResult) -> float:
    return max(r.end for r in result.records) - min(r.submit for r in result.records)


def comparison_lines(runs: Mapping[str, SimResult]) -> list[str]:
    """Makespan, mean wait and turnaround, utilization and resizes of each run (live and simulated)."""
    header = ("run", "makespan (s)", "mean wait (s)", "mean turnaround (s)", "utilization", "resizes")
    rows = []
    for label, result in runs.items():
        metrics = summarize(result)
        rows.append([
            label, f"{makespan(result):.1f}", f"{metrics['mean_wait']:.1f}", f"{metrics['mean_turnaround']:.1f}",
            f"{metrics['utilization']:.2f}", str(sum(r.expands + r.shrinks for r in result.records)),
        ])  # fmt: skip
    return table(rows, header)


def start_overhead(loop: MalleableLoop) -> float:
    """Mean seconds the jobs that never resized ran beyond their model run time: what a start costs here (MPI
    start-up), the simulator's `start_overhead`."""
    extra = [
        (s.end - s.start) - s.job.runtime_on(s.final)
        for s in loop.states.values()
        if s.phase == "done" and not (s.expands or s.shrinks)
    ]
    return max(0.0, sum(extra) / len(extra)) if extra else 0.0


# open: event lines of the malleable run, their fields by kind
def resize_overhead(loop: MalleableLoop, events: Iterable[Mapping[str, Any]], start: float) -> float:
    """Mean seconds from a resize's request to its restart (the loop's event log), plus a start: the simulator's
    `rescale_overhead`. 0 when nothing was resized."""
    asked: dict[str, float] = {}
    costs = []
    for event in events:
        what, job, t = str(event.get("what", "")), str(event.get("job", "")), float(event.get("t", 0.0))
        if what.startswith("asked to "):
            asked[job] = t
        elif what.startswith("restarted from its checkpoint") and job in asked:
            costs.append(t - asked.pop(job))
    return sum(costs) / len(costs) + start if costs else 0.0
