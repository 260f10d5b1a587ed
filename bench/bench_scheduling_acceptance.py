"""The scheduling papers' orderings, in full: the Jacobi mixes over 100 seeds and every shared trace at 100%
malleable over 10 seeds (means with interquartile ranges), each with a verdict line. Takes a few minutes.

    .venv/bin/python bench/bench_scheduling_acceptance.py [--jacobi-seeds 100] [--trace-seeds 10]
"""

from __future__ import annotations

import argparse
import json

from elasticity.sim.experiment import Row, reduce, run_jacobi, run_trace
from elasticity.sim.swf import read_swf
from elasticity.sim.traces import TRACES, trace_path
from elasticity.sim.workload import from_swf

STRATEGIES = ("min", "avg", "pref", "keeppref")


def show(title: str, rows: list[Row], metrics: tuple[str, ...]) -> None:
    print(title)
    print(f"  {'policy':<10}" + "".join(f"{m:>28}" for m in metrics))
    for row in rows:
        cells = "".join(f"{row.mean[m]:>18.3f} ±{row.iqr[m]:<9.3f}" for m in metrics)
        print(f"  {row.policy:<10}{cells}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jacobi-seeds", type=int, default=100)
    parser.add_argument("--trace-seeds", type=int, default=10)
    opts = parser.parse_args()
    verdicts: dict[str, bool] = {}

    policies = ["elastic", "moldable", "rigid-min", "rigid-max"]
    rows = reduce(run_jacobi(16, 90.0, policies, opts.jacobi_seeds, slots=64, rescale_gap=60.0))
    jacobi_metrics = ("total_time", "utilization", "weighted_response", "weighted_completion")
    show(f"Jacobi mixes, 16 jobs every 90 s on 64 slots, {opts.jacobi_seeds} seeds", rows, jacobi_metrics)
    by = {row.policy: row.mean for row in rows}
    verdicts["jacobi: elastic < moldable on total time"] = by["elastic"]["total_time"] < by["moldable"]["total_time"]
    verdicts["jacobi: elastic > moldable on utilization"] = by["elastic"]["utilization"] > by["moldable"]["utilization"]
    verdicts["jacobi: moldable > rigid-max on utilization"] = (
        by["moldable"]["utilization"] > by["rigid-max"]["utilization"]
    )

    for key in TRACES:
        base = from_swf(read_swf(trace_path(key)))
        rows = reduce(run_trace(base, ["easy", *STRATEGIES], [100.0], opts.trace_seeds))
        show(
            f"{base.name}: {len(base.jobs)} jobs on {base.nodes} nodes, 100% malleable, {opts.trace_seeds} seeds",
            rows,
            ("mean_turnaround", "mean_wait", "utilization"),
        )
        by = {row.policy: row.mean for row in rows}
        best = min(STRATEGIES, key=lambda s: by[s]["mean_turnaround"])
        verdicts[f"{key}: best strategy ({best}) < easy on mean turnaround"] = (
            by[best]["mean_turnaround"] < by["easy"]["mean_turnaround"]
        )
    for line, ok in verdicts.items():
        print(f"{'MET ' if ok else 'NOT MET'}  {line}")
    print(json.dumps({"bench": "scheduling_acceptance", "met": sum(verdicts.values()), "of": len(verdicts)}))


if __name__ == "__main__":
    main()
