"""Per-run metrics, with warm-up and drain-down excluded.

How (stated with every table): jobs are ordered by submission; the first and last ``EXCLUDED_SHARE`` (5%) of
them are the warm-up and drain-down and are left out of the job metrics (wait, run, turnaround, weighted
response/completion, expands and shrinks per job). Utilization is measured over the window from the first
to the last submission of the measured jobs, as busy node-seconds / (nodes x window). With fewer than
1/EXCLUDED_SHARE jobs (the Jacobi mixes) nothing is excluded and the window runs from the first submission to
the last completion. ``total_time`` is always the whole run: last completion minus first submission.
"""

from __future__ import annotations

from collections.abc import Sequence

from elasticity.sim.engine import JobRecord, SimResult

EXCLUDED_SHARE = 0.05
METRICS = (
    "jobs",
    "total_time",
    "utilization",
    "mean_wait",
    "mean_run",
    "mean_turnaround",
    "weighted_response",
    "weighted_completion",
    "expands_per_job",
    "shrinks_per_job",
)
EXCLUSION_NOTE = (
    f"warm-up/drain-down: the first and last {EXCLUDED_SHARE:.0%} of jobs by submission are excluded from job "
    "metrics; utilization is measured between the first and last measured submission "
    f"(workloads under {round(1 / EXCLUDED_SHARE)} jobs: nothing excluded, first submission to last completion)"
)


def measured(records: Sequence[JobRecord]) -> tuple[list[JobRecord], float, float]:
    """The jobs counted, and the utilization window."""
    ordered = sorted(records, key=lambda r: (r.submit, r.job))
    cut = int(len(ordered) * EXCLUDED_SHARE)
    if cut == 0:
        return ordered, ordered[0].submit, max(r.end for r in ordered)
    kept = ordered[cut : len(ordered) - cut]
    return kept, kept[0].submit, kept[-1].submit


def busy_node_seconds(busy: Sequence[tuple[float, int]], start: float, end: float) -> float:
    total = 0.0
    for (t0, nodes), (t1, _) in zip(busy, [*busy[1:], (float("inf"), 0)], strict=True):
        lo, hi = max(t0, start), min(t1, end)
        if hi > lo:
            total += nodes * (hi - lo)
    return total


def summarize(result: SimResult) -> dict[str, float]:
    records = result.records
    if not records:
        raise ValueError(f"{result.workload}: no jobs to measure")
    jobs, start, end = measured(records)
    count = len(jobs)
    weight = sum(r.priority for r in jobs)
    window = end - start
    utilization = busy_node_seconds(result.busy, start, end) / (result.nodes * window) if window > 0 else 0.0
    return {
        "jobs": float(count),
        "total_time": max(r.end for r in records) - min(r.submit for r in records),
        "utilization": utilization,
        "mean_wait": sum(r.start - r.submit for r in jobs) / count,
        "mean_run": sum(r.end - r.start for r in jobs) / count,
        "mean_turnaround": sum(r.end - r.submit for r in jobs) / count,
        "weighted_response": sum(r.priority * (r.start - r.submit) for r in jobs) / weight,
        "weighted_completion": sum(r.priority * (r.end - r.submit) for r in jobs) / weight,
        "expands_per_job": sum(r.expands for r in jobs) / count,
        "shrinks_per_job": sum(r.shrinks for r in jobs) / count,
    }
