"""Fine-grained placement (issue 29): the paper's scenarios on the local backend and on the simulated cluster.

Scenarios (Liu and Guitart): NONE (shared CPUs, the user's shape), CM (exclusive CPUs: whole cores, pinned),
CM_S / CM_G (exclusive, policy scale / granularity), CM_S_TG / CM_G_TG (the same with task groups).

Local: each job of the mix - the three placement kernels (dgemm: CPU, triad: memory, ring: network), 2 ranks
each - is its own MiniCluster (`minicluster up`, its command the kernel), shaped by the scenario from its
profile class. The class comes from a PMPI profile of the kernel (MPI time fraction) and the bytes it moved.
Every job is submitted at t=0; a small gang queue (this script: the scheduler's role) starts a job when its
pods' CPU requests fit this machine's free cores, in submission order. Response time = finish - submit, summed
over the jobs; makespan = last finish. Context switches and CPU migrations are each rank's own counters
(/proc/self/status voluntary+nonvoluntary_ctxt_switches, /proc/self/sched se.nr_migrations, read by the rank at
its end), averaged per rank, voluntary and involuntary also apart (involuntary ones are preemptions, mostly by
this machine's other work, so they are also given per second of the rank's loop, next to the load average of
each pass). Each rank also reports its Cpus_allowed_list (the `pinned` column: the share of ranks allowed on
one core only) and the CPU time its pod's broker used meanwhile (broker %: of the loop's wall time). On one
machine nodes are pods on the same cores, so task groups change nothing
locally (TG rows measure the same shape again: a repeat, and a view of the noise).

Simulated: elasticity/sim/placement.py, the same placement functions on 4+ simulated nodes, a 20-job mix of
the three classes, run times from its stated model. Also a sweep over seeds and loads: how often each scenario
is best.

Run: .venv/bin/python bench/bench_placement.py [--scenarios NONE,CM_G] [--repeat 3] [--skip-local] [--png placement.png]
[--record]. Prints tables; the last line is JSON {"scenarios": [{"scenario", "cluster", "response_time", "makespan",
"ctx_switches", "migrations", ...}, ...]} (simulated rows have no counters: null). Not a test: nothing asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from common import idset
from elasticity.figures.placement import write_placement_figure
from elasticity.policy.placement import mpi_fraction_from_duty, profile_class
from elasticity.policy.placement.profile_class import CommunicationProfile, ProfileClass
from elasticity.profiling.duty_cycle import analyze_job
from elasticity.profiling.profile import run_profiled
from elasticity.profiling.trace import read_job_traces
from elasticity.sim.placement import SCENARIOS, Scenario, paper_mix, simulate_scenario
from elasticity.workloads.placement_kernels import (
    DECLARED_CLASS,
    Kernel,
    KernelReport,
    RankReport,
    build_placement_kernels,
    parse_report,
)

MINICLUSTER = str(Path(sys.executable).with_name("minicluster"))
RANKS = 2
NODES = 2  # "nodes" the job may use: pods on this one machine
SIZES: dict[Kernel, tuple[int, int]] = {"dgemm": (200, 20), "triad": (2_000_000, 40), "ring": (1_000_000, 300)}
MIX: tuple[Kernel, ...] = ("dgemm", "triad", "ring")
RUN = os.getpid()  # in every cluster's name: local clusters are named per machine, and two runs must not collide
ENV = {
    **os.environ,
    "OMPI_ALLOW_RUN_AS_ROOT": "1",
    "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
    "OMPI_MCA_rmaps_base_oversubscribe": "1",
}


def say(message: str) -> None:
    print(message, flush=True)


# ------------------------------------------------------------------ profile classes from PMPI
def measured_class(program: Path, kind: Kernel, workdir: Path) -> tuple[ProfileClass, CommunicationProfile]:
    """Run the kernel under the PMPI profiler (mpirun, 2 ranks): MPI fraction from the duty cycles, bytes/s from
    the kernel's own count; the policy's classifier turns them into a class."""
    n, iterations = SIZES[kind]
    trace_dir = workdir / f"pmpi-{kind}"
    run = run_profiled(
        ["mpirun", "--oversubscribe", "-np", str(RANKS), str(program), kind, str(n), str(iterations)],
        trace_dir,
        jobid=kind,
        env=ENV,
        timeout=300,
    )
    if run.returncode != 0:
        raise SystemExit(f"profiling {kind} failed: {run.stderr[-400:]}")
    analysis = analyze_job(read_job_traces(trace_dir, kind))
    report = parse_report(run.stdout)
    measured = CommunicationProfile(
        mpi_fraction_from_duty([float(d) for d in analysis.duty]), report.communication().bytes_per_second
    )
    return profile_class(DECLARED_CLASS[kind], measured), measured


# ------------------------------------------------------------------ one job = one MiniCluster
@dataclass
class LocalJob:
    kind: Kernel
    profile: ProfileClass
    name: str
    spec: Path
    cores: int
    started: float | None = None
    ended: float | None = None
    report: KernelReport | None = None
    error: str = ""


def job_spec(scenario: Scenario, kind: Kernel, profile: ProfileClass, program: Path, directory: Path) -> LocalJob:
    n, iterations = SIZES[kind]
    name = f"placement-{RUN}-{scenario.name.lower().replace('_', '-')}-{kind}"
    container: dict[str, Any] = {
        "image": "local",
        "command": f"{program} {kind} {n} {iterations}",
        "resources": {"requests": {"memory": "256Mi"}},
    }
    spec: dict[str, Any] = {"tasks": RANKS, "containers": [container]}
    if scenario.policy == "none":  # the user's shape: one pod holding the job, a core per rank requested
        spec["size"] = 1
        container["resources"]["requests"]["cpu"] = str(RANKS)
    else:
        spec["size"] = NODES
    spec["placement"] = {
        "profile": profile,
        "policy": scenario.policy,
        "cpus": "exclusive" if scenario.exclusive else "shared",
    }
    data = {"apiVersion": "miniclusters.dev/v1alpha1", "kind": "MiniCluster", "metadata": {"name": name}, "spec": spec}
    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return LocalJob(kind, profile, name, path, cores=RANKS)  # every shape requests a core per rank in all


def run_job(job: LocalJob, t0: float, lock: threading.Lock, free: list[int]) -> None:
    job.started = time.monotonic() - t0
    done = subprocess.run([MINICLUSTER, "up", str(job.spec)], capture_output=True, text=True, env=ENV, timeout=900)
    job.ended = time.monotonic() - t0
    try:
        job.report = parse_report(done.stdout)
    except ValueError:
        job.error = f"exit {done.returncode}: {(done.stderr or done.stdout)[-400:]}"
    with lock:
        free[0] += job.cores


def rank_figures(ranks: list[RankReport]) -> dict[str, float | None]:
    """Per-rank means of the counters (None without ranks): what pinning changes, and what preempts the ranks."""
    if not ranks:
        return dict.fromkeys(COUNTERS)
    seconds = [max(r.seconds, 1e-9) for r in ranks]
    brokers = [r.broker_cpu_ms / (1000 * s) for r, s in zip(ranks, seconds, strict=True) if r.broker_cpu_ms >= 0]
    return {
        "ctx_switches": round(statistics.fmean(r.ctx_switches for r in ranks), 1),
        "voluntary": round(statistics.fmean(r.voluntary_ctxt_switches for r in ranks), 1),
        "nonvoluntary": round(statistics.fmean(r.nonvoluntary_ctxt_switches for r in ranks), 1),
        "nonvoluntary_per_s": round(
            statistics.fmean(r.nonvoluntary_ctxt_switches / s for r, s in zip(ranks, seconds, strict=True)), 1
        ),
        "migrations": round(statistics.fmean(r.migrations for r in ranks), 2),
        "pinned": round(sum(len(idset.decode(r.cpus)) == 1 for r in ranks if r.cpus) / len(ranks), 2),
        "broker_share": round(statistics.fmean(brokers), 4) if brokers else None,
    }


COUNTERS = ("ctx_switches", "voluntary", "nonvoluntary", "nonvoluntary_per_s", "migrations", "pinned", "broker_share")


def run_local_scenario(
    scenario: Scenario, classes: dict[Kernel, ProfileClass], program: Path, workdir: Path
) -> dict[str, Any]:
    jobs = [job_spec(scenario, kind, classes[kind], program, workdir) for kind in MIX]
    load_before = os.getloadavg()[0]
    machine = len(os.sched_getaffinity(0))
    free = [machine]
    lock = threading.Lock()
    threads: list[threading.Thread] = []
    t0 = time.monotonic()
    queue = list(jobs)
    while queue:  # the gang queue: in submission order, start what fits the free cores
        with lock:
            head = queue[0]
            fits = head.cores <= free[0]
            if fits:
                free[0] -= head.cores
        if fits:
            queue.pop(0)
            thread = threading.Thread(target=run_job, args=(head, t0, lock, free), daemon=True)
            thread.start()
            threads.append(thread)
        else:
            time.sleep(0.2)
    for thread in threads:
        thread.join()
    failed = [j for j in jobs if j.report is None]
    for job in failed:
        say(f"  {scenario.name} {job.kind}: FAILED {job.error}")
    ranks = [r for j in jobs if j.report for r in j.report.ranks]
    ends = [j.ended or 0.0 for j in jobs]
    row = {
        "scenario": scenario.name,
        "cluster": "local",
        "response_time": round(sum(ends), 3),
        "makespan": round(max(ends), 3),
        **rank_figures(ranks),
        "load": round((load_before + os.getloadavg()[0]) / 2, 1),
        "failed": len(failed),
        "by_class": {
            job.profile: {
                "kernel": job.kind,
                "voluntary": sum(r.voluntary_ctxt_switches for r in job.report.ranks) / len(job.report.ranks),
                "nonvoluntary": sum(r.nonvoluntary_ctxt_switches for r in job.report.ranks) / len(job.report.ranks),
                "migrations": sum(r.migrations for r in job.report.ranks) / len(job.report.ranks),
                "pods": len({r.host for r in job.report.ranks}),
                "cpus": " ".join(r.cpus for r in job.report.ranks),
            }
            for job in jobs
            if job.report
        },
    }
    for job in jobs:
        if job.report:
            say(
                f"  {scenario.name:8s} {job.kind:5s} class={job.profile:7s} start={job.started:6.1f}s "
                f"end={job.ended:6.1f}s kernel={job.report.seconds:5.2f}s "
                f"ctx/rank={sum(r.ctx_switches for r in job.report.ranks) / len(job.report.ranks):7.0f} "
                f"migrations/rank={sum(r.migrations for r in job.report.ranks) / len(job.report.ranks):5.1f} "
                f"hosts={','.join(r.host for r in job.report.ranks)} "
                f"cpus={' '.join(r.cpus for r in job.report.ranks)}"
            )
    return row


def median_row(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """One scenario's passes: the median of each figure (None where no pass had one)."""

    def median(key: str) -> float | None:
        values = [r[key] for r in rows if r[key] is not None]
        return round(statistics.median(values), 3) if values else None

    figures = {key: median(key) for key in ("response_time", "makespan", *COUNTERS, "load")}
    by_class: dict[str, dict[str, Any]] = {}
    for cls in {c for r in rows for c in r["by_class"]}:
        seen = [r["by_class"][cls] for r in rows if cls in r["by_class"]]
        by_class[cls] = {"kernel": seen[0]["kernel"], "pods": seen[0]["pods"], "cpus": seen[-1]["cpus"]} | {
            key: round(statistics.median(x[key] for x in seen), 1)
            for key in ("voluntary", "nonvoluntary", "migrations")
        }
    return {"scenario": rows[0]["scenario"], "cluster": "local", **figures, "passes": len(rows),
            "failed": sum(r["failed"] for r in rows), "by_class": by_class}  # fmt: skip


def class_table(rows: list[dict[str, Any]]) -> None:
    """Per class: which counters pinning moves (and which the machine's other work does)."""
    say("  per rank, median over passes: voluntary / involuntary context switches, migrations (pods per job)")
    for row in rows:
        parts = [
            f"{cls}: {c['voluntary']:.0f}/{c['nonvoluntary']:.0f}, {c['migrations']:.1f} ({c['pods']} pod, "
            f"cpus {c['cpus']})"
            for cls, c in sorted(row["by_class"].items())
        ]
        say(f"  {row['scenario']:9s} " + "; ".join(parts))


# ------------------------------------------------------------------ simulated cluster
def simulated_rows(nodes: int, cores: int, gap: float) -> list[dict[str, Any]]:
    jobs = paper_mix(count=20, seed=7, mean_gap=gap)
    rows = []
    for scenario in SCENARIOS:
        result = simulate_scenario(jobs, scenario, nodes, cores)
        rows.append(
            {
                "scenario": scenario.name,
                "cluster": "simulated",
                "response_time": round(result.response_time, 1),
                "makespan": round(result.makespan, 1),
                "ctx_switches": None,
                "migrations": None,
            }
        )
    return rows


def sweep(seeds: int = 8) -> None:
    """How often each scenario has the best overall response time (ties within 0.5% all count)."""
    say("\nsimulated sweep: scenarios within 0.5% of the best response time, per cluster and load")
    for nodes, cores in ((4, 24), (4, 32), (8, 24)):
        for gap in (10.0, 20.0, 40.0):
            wins = dict.fromkeys((s.name for s in SCENARIOS), 0)
            for seed in range(seeds):
                jobs = paper_mix(count=20, seed=seed, mean_gap=gap)
                totals = {s.name: simulate_scenario(jobs, s, nodes, cores).response_time for s in SCENARIOS}
                best = min(totals.values())
                for name, total in totals.items():
                    wins[name] += total <= best * 1.005
            shown = " ".join(f"{k}={v}" for k, v in wins.items())
            say(f"  {nodes} nodes x {cores} cores, mean gap {gap:4.0f}s, {seeds} seeds: {shown}")


def table(rows: list[dict[str, Any]]) -> None:
    base = rows[0]["response_time"] if rows else 0
    counters = any(row.get("voluntary") is not None for row in rows)
    extra = (
        f" {'vol':>6s} {'invol':>6s} {'invol/s':>7s} {'pinned':>6s} {'broker%':>7s} {'load':>5s}" if counters else ""
    )
    say(
        f"  {'scenario':9s} {'response':>10s} {'vs NONE':>8s} {'makespan':>9s} {'ctx/rank':>9s} "
        f"{'migr/rank':>9s}{extra}"
    )
    for row in rows:
        change = f"{100 * (row['response_time'] - base) / base:+.1f}%" if base else "-"
        ctx = "-" if row["ctx_switches"] is None else f"{row['ctx_switches']:.0f}"
        mig = "-" if row["migrations"] is None else f"{row['migrations']:.1f}"
        figures = f"{row['response_time']:10.1f} {change:>8s} {row['makespan']:9.1f} {ctx:>9s} {mig:>9s}"
        if counters:
            broker = "-" if row.get("broker_share") is None else f"{100 * row['broker_share']:.2f}"
            figures += (
                f" {row['voluntary']:6.0f} {row['nonvoluntary']:6.0f} {row['nonvoluntary_per_s']:7.1f}"
                f" {row['pinned']:6.2f} {broker:>7s} {row['load']:5.1f}"
            )
        say(f"  {row['scenario']:9s} {figures}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenarios", default=",".join(s.name for s in SCENARIOS))
    parser.add_argument("--skip-local", action="store_true")
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--cores", type=int, default=24)
    parser.add_argument("--gap", type=float, default=20.0, help="simulated mean seconds between submissions")
    parser.add_argument("--png", default="placement.png")
    parser.add_argument("--repeat", type=int, default=1, help="local passes over the scenarios (medians reported)")
    parser.add_argument("--record", action="store_true", help="write the JSON line into bench/results.toml")
    opts = parser.parse_args()
    chosen = [s for s in SCENARIOS if s.name in opts.scenarios.split(",")]
    unknown = set(opts.scenarios.split(",")) - {s.name for s in SCENARIOS}
    if unknown:
        parser.error(
            f"--scenarios: unknown {', '.join(sorted(unknown))} (known: {', '.join(s.name for s in SCENARIOS)})"
        )
    if opts.repeat < 1:
        parser.error("--repeat must be at least 1")
    if opts.nodes < 1 or opts.cores < 16:
        parser.error("--nodes must be >= 1 and --cores >= 16 (the mix has 16-rank jobs)")
    rows: list[dict[str, Any]] = []
    panels: dict[str, list[tuple[str, float, float]]] = {}
    if not opts.skip_local:
        if os.geteuid() != 0:
            raise SystemExit("the local scenarios pin pods with cpuset cgroups: run as root (or --skip-local)")
        program = build_placement_kernels()
        workdir = Path(tempfile.mkdtemp(prefix="bench-placement-"))
        say(f"local: {len(os.sched_getaffinity(0))} cores; profiling the kernels under PMPI ({workdir})")
        classes: dict[Kernel, ProfileClass] = {}
        for kind in MIX:
            cls, measured = measured_class(program, kind, workdir)
            classes[kind] = cls
            say(
                f"  {kind:5s}: MPI fraction {measured.mpi_fraction:.2f}, "
                f"{(measured.bytes_per_second or 0) / 1e6:7.1f} MB/s per rank -> {cls} "
                f"(declared {DECLARED_CLASS[kind]})"
            )
        runs: dict[str, list[dict[str, Any]]] = {s.name: [] for s in chosen}
        for repeat in range(opts.repeat):  # scenarios interleaved, each pass starting one later: drift spreads out
            order = chosen[repeat % len(chosen) :] + chosen[: repeat % len(chosen)]
            for scenario in order:
                say(f"pass {repeat + 1}/{opts.repeat}, scenario {scenario.name}: {', '.join(MIX)} submitted at once")
                runs[scenario.name].append(run_local_scenario(scenario, classes, program, workdir))
        local = [median_row(runs[s.name]) for s in chosen]
        say(f"\nlocal backend, median of {opts.repeat} pass(es) (this machine's other work counts against all alike):")
        table(local)
        class_table(local)
        rows += local
        panels["local backend (2 ranks per job)"] = [(r["scenario"], r["response_time"], r["makespan"]) for r in local]
    simulated = [
        r for r in simulated_rows(opts.nodes, opts.cores, opts.gap) if r["scenario"] in {s.name for s in chosen}
    ]
    say(f"\nsimulated cluster: {opts.nodes} nodes x {opts.cores} cores, 20 jobs (cpu/memory/network, 4-16 ranks):")
    table(simulated)
    rows += simulated
    panels[f"simulated ({opts.nodes} nodes x {opts.cores} cores)"] = [
        (r["scenario"], r["response_time"], r["makespan"]) for r in simulated
    ]
    sweep()
    png = write_placement_figure(panels, opts.png)
    say(f"\nfigure: {png}")
    line = {"scenarios": rows}
    print(json.dumps(line), flush=True)
    if opts.record:
        from docsgen.benchmarks import record_result

        record_result("placement", line)


if __name__ == "__main__":
    main()
