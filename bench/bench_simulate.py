"""Simulator speed: one policy over the 18,239-job NASA iPSC/860 trace (target: under 5 s), plus each malleable
strategy at 100% malleable for comparison (prints figures and one JSON line).

Timed: reading and parsing the SWF file, building the workload, the event-driven replay and the metrics --
everything `minicluster simulate TRACE --policy P --seeds 1` does apart from printing. Best of --repeat runs.

    .venv/bin/python bench/bench_simulate.py [--policy easy] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from elasticity.policy.scheduling import policy_named
from elasticity.sim.engine import simulate
from elasticity.sim.metrics import summarize
from elasticity.sim.swf import read_swf
from elasticity.sim.traces import trace_path
from elasticity.sim.workload import from_swf, with_malleable

TARGET_S = 5.0


def one_run(path: Path, policy: str, malleable: float) -> tuple[float, dict[str, float], int]:
    start = time.perf_counter()
    base = from_swf(read_swf(path))
    work = with_malleable(base, malleable, seed=0) if malleable else base
    result = simulate(work, policy_named(policy), policy_name=policy)
    metrics = summarize(result)
    return time.perf_counter() - start, metrics, len(result.records)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", default="easy")
    parser.add_argument("--repeat", type=int, default=3)
    opts = parser.parse_args()
    path = trace_path("nasa")
    print(f"simulator speed: {path.name}, {os.cpu_count()} CPUs, best of {opts.repeat}")
    figures: dict[str, float] = {}
    for policy, share in [(opts.policy, 0.0), ("min", 100.0), ("avg", 100.0), ("pref", 100.0), ("keeppref", 100.0)]:
        best = min(one_run(path, policy, share)[0] for _ in range(opts.repeat))
        _, metrics, jobs = one_run(path, policy, share)
        label = f"{policy} ({share:g}% malleable)"
        print(
            f"  {label:<26} {jobs} jobs  {best:6.2f} s  {jobs / best:8.0f} jobs/s  "
            f"mean turnaround {metrics['mean_turnaround']:.0f} s  utilization {metrics['utilization']:.3f}"
        )
        figures[f"{policy}_{share:g}_s"] = round(best, 3)
    headline = figures[f"{opts.policy}_0_s"]
    verdict = "meets" if headline < TARGET_S else "MISSES"
    print(f"{opts.policy} over the NASA trace: {headline:.2f} s ({verdict} the {TARGET_S:g} s target)")
    print(json.dumps({"bench": "simulate", "trace": path.name, "policy": opts.policy, "seconds": headline, **figures}))


if __name__ == "__main__":
    main()
