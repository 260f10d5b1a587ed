"""How MPI waits decide what multiplexing can reclaim: busy-polling, yielding and sleeping ranks in Open MPI 4.1.

An imbalanced 2-rank proxy solver (rank 0 light, waiting in MPI_Barrier most of the time; rank 1 heavy) runs
pinned to one core, alone and next to a co-located CPU-bound job (a counting loop standing in for another
simulation's rank), with four settings: Open MPI polling (OMPI_MCA_mpi_yield_when_idle=0), polling with
sched_yield (=1), and our PMPI library's sleep wait mode (MC_MPI_WAIT=sleep, what `-o mpi-wait=sleep` sets) with
timed naps only (MC_MPI_WAIT_EVENTS=0) and woken by arriving messages as well (the default).
Printed per setting: the CPU time the waiting rank burned, the MPI job's makespan, and the co-located job's
throughput relative to running alone.

Run: .venv/bin/python bench/bench_mpi_wait.py [--iterations 600] [--repeat 2] [--cpu 1]
Prints figures and, last, one JSON line; it is not a test (no thresholds are asserted).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from broker.testing import LOOPBACK_MPI_ENV
from docsgen.benchmarks import record_result
from elasticity.pmpi.build import build_pmpi_library
from elasticity.pmpi.env import wait_environment
from elasticity.workloads.proxy import build_proxy_solver, proxy_arguments

# Runs one rank and reports its own CPU time (user + system of the rank process) on stderr as JSON.
RANK_WRAPPER = """
import json, os, resource, subprocess, sys, time
start = time.monotonic()
env = dict(os.environ)
if env.get("WRAP_PRELOAD"):  # the profiler library goes into the rank only, not into this Python
    env["LD_PRELOAD"] = env["WRAP_PRELOAD"]
rc = subprocess.call(sys.argv[1:], env=env)
u = resource.getrusage(resource.RUSAGE_CHILDREN)
rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "-1"))
print("RANKUSAGE " + json.dumps({"rank": rank, "cpu": u.ru_utime + u.ru_stime,
      "wall": time.monotonic() - start}), file=sys.stderr, flush=True)
sys.exit(rc)
"""

# A CPU-bound co-located job: counts loop iterations until SIGTERM, then prints how many per second.
HOG = """
import signal, sys, time
stop = False
def handler(*_):
    global stop
    stop = True
signal.signal(signal.SIGTERM, handler)
n = 0
start = time.monotonic()
while not stop:
    for _ in range(20000):
        pass
    n += 1
print(n / (time.monotonic() - start), flush=True)
"""


SETTINGS = ("poll", "yield", "sleep-timed", "sleep")
"""sleep-timed: the sleep wait mode with timed naps only (MC_MPI_WAIT_EVENTS=0); sleep: woken by messages too."""


FORWARDED = ("WRAP_PRELOAD", "MC_PMPI_TRACE", "MC_MPI_WAIT", "MC_MPI_WAIT_EVENTS")


def mpi_env(setting: str, library: Path) -> dict[str, str]:
    env = {**os.environ, **LOOPBACK_MPI_ENV, "OMPI_MCA_rmaps_base_oversubscribe": "1"}
    env["OMPI_MCA_mpi_yield_when_idle"] = "0" if setting == "poll" else "1"
    if setting.startswith("sleep"):
        waiting = wait_environment(library, "sleep", base={})
        env.update(WRAP_PRELOAD=waiting.pop("LD_PRELOAD"), **waiting)
        env["MC_MPI_WAIT_EVENTS"] = "0" if setting == "sleep-timed" else "1"
    return env


def start_hog(cpu: int) -> subprocess.Popen[str]:
    return subprocess.Popen(["taskset", "-c", str(cpu), sys.executable, "-c", HOG], stdout=subprocess.PIPE, text=True)


def stop_hog(hog: subprocess.Popen[str]) -> float:
    hog.send_signal(signal.SIGTERM)
    out, _ = hog.communicate(timeout=30)
    return float(out.strip())


def hog_alone(cpu: int, seconds: float) -> float:
    hog = start_hog(cpu)
    time.sleep(seconds)
    return stop_hog(hog)


def run_mpi(solver: Path, wrapper: Path, args: list[str], cpu: int, setting: str, library: Path) -> dict[str, float]:
    argv = [
        "taskset",
        "-c",
        str(cpu),
        "mpirun",
        "-np",
        "2",
        "--bind-to",
        "none",
        *[arg for name in FORWARDED for arg in ("-x", name)],
        sys.executable,
        str(wrapper),
        str(solver),
        *args,
    ]
    started = time.monotonic()
    # in the bench's temporary directory: a rank that records a trace writes it into its working directory
    done = subprocess.run(
        argv, env=mpi_env(setting, library), cwd=wrapper.parent, capture_output=True, text=True, timeout=600
    )
    makespan = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"mpirun failed ({done.returncode}): {done.stderr[-2000:]}")
    usage = {}
    for match in re.finditer(r"RANKUSAGE (\{[^}]*\})", done.stderr):  # the ranks' lines may interleave
        record = json.loads(match.group(1))
        usage[record["rank"]] = record
    return {
        "makespan": makespan,
        "waiting_cpu": usage[0]["cpu"],
        "waiting_wall": usage[0]["wall"],
        "busy_cpu": usage[1]["cpu"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=600)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--cpu", type=int, default=1, help="the core everything is pinned to")
    parser.add_argument("--record", action="store_true", help="write the JSON line into bench/results.toml")
    opts = parser.parse_args()

    solver = build_proxy_solver()
    library = build_pmpi_library()
    args = proxy_arguments(opts.iterations, [1, 12], nx=2048, rows_per_weight=48)
    workdir = Path(tempfile.mkdtemp(prefix="bench-mpi-wait-"))
    wrapper = workdir / "rank_usage.py"
    wrapper.write_text(RANK_WRAPPER)

    alone_rate = statistics.median(hog_alone(opts.cpu, 3.0) for _ in range(opts.repeat))
    print(f"co-located job alone on core {opts.cpu}: {alone_rate:.0f} loops/s", flush=True)
    results: dict[str, dict[str, float]] = {}
    for label in SETTINGS:
        alone = [run_mpi(solver, wrapper, args, opts.cpu, label, library) for _ in range(opts.repeat)]
        shared: list[dict[str, float]] = []
        rates: list[float] = []
        for _ in range(opts.repeat):
            hog = start_hog(opts.cpu)
            time.sleep(0.3)
            shared.append(run_mpi(solver, wrapper, args, opts.cpu, label, library))
            rates.append(stop_hog(hog))

        def med(rows: list[dict[str, float]], key: str) -> float:
            return statistics.median(r[key] for r in rows)

        results[label] = {
            "makespan_alone_s": med(alone, "makespan"),
            "waiting_rank_cpu_s": med(alone, "waiting_cpu"),
            "waiting_rank_cpu_fraction": med(alone, "waiting_cpu") / med(alone, "waiting_wall"),
            "busy_rank_cpu_s": med(alone, "busy_cpu"),
            "makespan_colocated_s": med(shared, "makespan"),
            "waiting_rank_cpu_colocated_s": med(shared, "waiting_cpu"),
            "colocated_throughput": statistics.median(rates) / alone_rate,
        }
        r = results[label]
        print(
            f"{label}: alone makespan {r['makespan_alone_s']:.2f}s, waiting rank {r['waiting_rank_cpu_s']:.2f}s CPU "
            f"({r['waiting_rank_cpu_fraction']:.0%} of its wall time), busy rank {r['busy_rank_cpu_s']:.2f}s; "
            f"next to a CPU-bound job: makespan {r['makespan_colocated_s']:.2f}s, waiting rank "
            f"{r['waiting_rank_cpu_colocated_s']:.2f}s CPU, co-located job at {r['colocated_throughput']:.0%} "
            f"of its alone rate",
            flush=True,
        )
    figures = {"iterations": opts.iterations, "cpu": opts.cpu, **results}
    print(json.dumps(figures))
    if opts.record:
        record_result("mpi_wait", figures)


if __name__ == "__main__":
    main()
