"""PMPI profiler overhead: the synthetic MPI program with and without LD_PRELOAD of libmcpmpi.so.

Runs alternate (plain, profiled, plain, ...) so that load from other processes hits both alike;
the figure is the median over repeats of the program's own span (MPI_Init return to the last
barrier, the slowest rank), which excludes mpirun's start-up; mpirun's whole wall time is shown
too. Two shapes: compute-bound (few calls, long iterations) and communication-bound (many short
iterations: the per-call cost dominates). The OpenFOAM measurement is to be added here.

    .venv/bin/python bench/bench_pmpi_overhead.py [--np 4] [--repeats 7]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from broker.testing import LOOPBACK_MPI_ENV
from elasticity.pmpi.build import build_pmpi_library
from elasticity.pmpi.env import pmpi_environment

REPO = Path(__file__).resolve().parent.parent
PROGRAM = REPO / "tests" / "elasticity" / "data" / "spin_mpi.c"
SPAN_RE = re.compile(r"MC_SELF rank=\d+ iterations=\d+ spin_s=[\d.]+ span_s=([\d.]+)")
SHAPES: dict[str, tuple[int | None, int, int]] = {
    # name: (ranks, None = --np; iterations; base microseconds of work for rank 0)
    "compute-bound": (None, 40, 4000),
    "communication-bound": (None, 3000, 20),
    # One rank, no work: every MPI call is nearly free, so the difference is the wrapper's own
    # cost per call (two clock reads and a store), an upper bound for any application.
    "per-call cost (1 rank)": (1, 100000, 0),
}
COLUMNS = ("workload", "ranks", "calls/rank", "span plain s", "span profiled s", "overhead", "ns/call", "mpirun s")


def mpi_env() -> dict[str, str]:
    return {**os.environ, **LOOPBACK_MPI_ENV}


def run_once(exe: Path, np_: int, iterations: int, base_us: int, env: dict[str, str]) -> tuple[float, float, int]:
    """(program span s, mpirun wall s, MPI calls recorded per rank or 0)."""
    cmd = ["mpirun", "-np", str(np_), "--oversubscribe", str(exe), str(iterations), str(base_us)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}")
    spans = [float(m) for m in SPAN_RE.findall(proc.stdout)]
    if len(spans) != np_:
        raise SystemExit(f"expected {np_} MC_SELF lines, got:\n{proc.stdout}")
    return max(spans), wall, 4 * iterations


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--np", type=int, default=4, dest="np_")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="pmpi-bench-") as tmp:
        work = Path(tmp)
        lib = build_pmpi_library(work / "lib")
        exe = work / "spin_mpi"
        subprocess.run(["mpicc", "-O2", "-o", str(exe), str(PROGRAM)], check=True)
        plain = mpi_env()

        table = Table(title=f"PMPI overhead, median of {args.repeats} alternating runs")
        for col in COLUMNS:
            table.add_column(col, justify="left" if col == "workload" else "right")
        for name, (ranks, iterations, base_us) in SHAPES.items():
            n = ranks or args.np_
            spans: dict[bool, list[float]] = {False: [], True: []}
            walls: dict[bool, list[float]] = {False: [], True: []}
            calls = 0
            for _ in range(args.repeats):
                for profiled in (False, True):
                    env = plain
                    if profiled:
                        traces = Path(tempfile.mkdtemp(prefix="traces-", dir=work))
                        env = pmpi_environment(lib, traces, jobid="bench", base=plain)
                    span, wall, calls = run_once(exe, n, iterations, base_us, env)
                    spans[profiled].append(span)
                    walls[profiled].append(wall)
            base, prof = statistics.median(spans[False]), statistics.median(spans[True])
            table.add_row(
                name,
                str(n),
                str(calls),
                f"{base:.4f}",
                f"{prof:.4f}",
                f"{(prof - base) / base:+.2%}",
                f"{(prof - base) / calls * 1e9:.0f}" if n == 1 else "noise",
                f"{statistics.median(walls[False]):.2f} / {statistics.median(walls[True]):.2f}",
            )
        Console(width=140).print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
