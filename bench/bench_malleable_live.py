"""Malleable jobs live against the simulator (issue 44's acceptance figures), measured in one run.

One MiniCluster of 8 nodes (8 brokers of the local backend) runs a window of a shared trace (default: the first
16 jobs of SDSC SP2, scaled to 8 nodes and minutes; every job malleable) as real MPI Jacobi solvers, twice:
  1. rigid: EASY backfilling, every job on its preferred size from start to end;
  2. malleable: KeepPref (or --policy), which starts, shrinks and expands them; a resize is the solver's
     checkpoint, then a restart on the new node count from it.
The simulator replays the same workload under both policies. Its two parameters beyond the workload are what this
run measured: the seconds a start costs (how long the rigid jobs ran beyond their model run time: MPI start-up)
and the seconds a resize costs (from its request to its restart, plus a start), so the prediction is the model's
on this machine's constants. Every job's answer (a digest of its grid) is
compared with a rigid one-rank run of the same problem.

Run: .venv/bin/python bench/bench_malleable_live.py [--trace sdsc] [--jobs 16] [--policy keeppref] [--record]
     # as root; about 7 minutes here
Prints a table per run and one JSON line: jobs, makespan_/turnaround_ live/sim rigid/malleable, resizes,
answers_equal, rescale_overhead_s, load. It is not a test (no thresholds are asserted).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from docsgen.benchmarks import record_result
from elasticity.control.events import read_events
from elasticity.policy.scheduling.registry import policy_named
from elasticity.sim.engine import SimResult, simulate
from elasticity.sim.metrics import summarize
from miniclusters.api import load_minicluster_file
from miniclusters.backends.base import CreateOptions
from miniclusters.backends.local.backend import LocalBackend
from miniclusters.malleable.report import comparison_lines, makespan, resize_overhead, start_overhead
from miniclusters.malleable.session import LiveRun, run_live

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "malleable.yaml"
NAME = "benchmalleable"


def say(message: str) -> None:
    print(message, flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trace", default="sdsc", choices=["sdsc", "hpc2n", "nasa", "lublin"])
    parser.add_argument("--jobs", type=int, default=16)
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--policy", default="keeppref", choices=["min", "avg", "pref", "keeppref"])
    parser.add_argument("--record", action="store_true", help="write the JSON line into bench/results.toml")
    opts = parser.parse_args()
    if opts.jobs < 1 or opts.first < 0:
        parser.error("--jobs must be at least 1 and --first at least 0")
    base = load_minicluster_file(EXAMPLE)
    assert base.spec.malleable is not None
    malleable = base.spec.malleable.model_copy(update={"trace": opts.trace, "jobs": opts.jobs, "first": opts.first})
    spec = base.spec.model_copy(update={"malleable": malleable, "interactive": True})
    mc = base.model_copy(update={"metadata": base.metadata.model_copy(update={"name": NAME}), "spec": spec})
    backend = LocalBackend()
    if backend.exists(mc):
        backend.delete(NAME)
    load = os.getloadavg()[0]
    runs: dict[str, LiveRun] = {}
    backend.create(mc, CreateOptions())
    try:
        for policy in ("easy", opts.policy):
            started = time.monotonic()
            runs[policy] = run_live(backend, mc, say, policy)
            say(f"{policy}: {time.monotonic() - started:.0f} s")
    finally:
        backend.delete(NAME)
    rigid, flexible = runs["easy"], runs[opts.policy]
    launch = start_overhead(rigid.loop)
    overhead = resize_overhead(flexible.loop, read_events(flexible.port.workdir / "events.jsonl"), launch)
    sims: dict[str, SimResult] = {
        policy: simulate(run.workload, policy_named(policy), policy_name=policy, rescale_overhead=overhead,
                         start_overhead=launch)
        for policy, run in runs.items()
    }  # fmt: skip
    for line in comparison_lines({
        "live easy (rigid)": rigid.result, f"live {opts.policy}": flexible.result,
        "simulated easy": sims["easy"], f"simulated {opts.policy}": sims[opts.policy],
    }):  # fmt: skip
        say(line)

    def turnaround(result: SimResult) -> float:
        return round(summarize(result)["mean_turnaround"], 2)

    figures: dict[str, Any] = {
        "jobs": len(flexible.loop.jobs),
        "makespan_live_rigid": round(makespan(rigid.result), 2),
        "makespan_live_malleable": round(makespan(flexible.result), 2),
        "turnaround_live_rigid": turnaround(rigid.result),
        "turnaround_live_malleable": turnaround(flexible.result),
        "makespan_sim_rigid": round(makespan(sims["easy"]), 2),
        "makespan_sim_malleable": round(makespan(sims[opts.policy]), 2),
        "turnaround_sim_rigid": turnaround(sims["easy"]),
        "turnaround_sim_malleable": turnaround(sims[opts.policy]),
        "resizes": flexible.loop.resizes,
        "answers_equal": rigid.answers_equal and flexible.answers_equal,
        "policy": opts.policy,
        "trace": f"{opts.trace}:{opts.first}+{opts.jobs}",
        "start_overhead_s": round(launch, 2),
        "rescale_overhead_s": round(overhead, 2),
        "load": round(load, 2),
    }
    live = ("makespan_live_rigid", "makespan_live_malleable", "turnaround_live_rigid", "turnaround_live_malleable")
    for key in live:
        predicted = figures[key.replace("live", "sim")]
        say(f"{key}: live {figures[key]:.1f} s, simulated {predicted:.1f} s ({predicted / figures[key] - 1:+.1%})")
    say(f"turnaround: malleable {1 - figures['turnaround_live_malleable'] / figures['turnaround_live_rigid']:.1%} "
        "below rigid (live)")  # fmt: skip
    print(json.dumps(figures), flush=True)
    if opts.record:
        record_result("malleable-live", figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
