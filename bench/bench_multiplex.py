"""CPU multiplexing on the local backend, measured in one run (issue 15's acceptance figures; issue 45's target 6).

One MiniCluster of 2 pods (1 CPU requested each, the rigid "equal" allocation) runs 4-rank simulations of one of
two applications (`--app`):
- `proxy` (default): the proxy solver with a weighted band decomposition 1,1,1,60 of 192-row bands, 2048 cells
  wide (one dense rank, three sparse ones waiting in MPI; mean duty cycle about 24%; about 27 ms per iteration
  alone, the grain of a small CFD case; at --rows 48, 8 ms iterations, message latency dominates, see
  docs/benchmarks.md);
- `openfoam`: real rhoSimpleFoam on the NACA0012 tutorial (16,000 cells), split in concentric rings with the
  seed's imbalanced layout for 4 ranks (weights 1,1,5,15: two sparse far-field ranks, a medium one and the dense
  near-wall one), forceCoeffs every iteration and no convergence stop (every run does --iterations); each job
  runs in its own copy of the case (elasticity/workloads/foam_jobs.py), profiled with MPI_Allreduce ending a
  window (rhoSimpleFoam calls no MPI_Barrier; about 700 reductions per iteration).
Measured, each in the same run:
  1. T_1: one simulation alone, equal allocation, no controller;
  2. two simulations at once with equal allocation (no controller): Theta(2)_equal = 2 T_1 / their makespan;
  3. `minicluster multiplex --max 2 --total 2 --profile-together 2`: the controller starts both at once,
     profiles them side by side, resizes in place; makespan2 = first submission to last completion,
     Theta(2) = 2 T_1 / makespan2; cpu_requested_reduction = 1 - the controller's total request while both ran
     (after their profiles) / equal allocation's (each simulation with its own 2 pods at 1 CPU: 4000m);
  4. (proxy only) the paper's order (`--profile-together 1`: the second is packed once the first is profiled),
     Theta(2)_profiled_first; beta fitted from (T_1, makespan2) with the CPU demand u from the profiles' duty
     cycles, Theta(3) predicted with it (and by the paper's line, u unknown), and measured with
     `minicluster multiplex --max 3 --total 3 --profile-together 3` (all three at once, as the model assumes).
With --beside K, K CPU-bound processes (busy loops standing in for another tenant's work) run on the machine
through every measurement, T_1 included: Theta is then what multiplexing gains under that interference.
Every job runs with the wait mode the controller applies (`-o mpi-wait=sleep`; `--controller-wait poll` gives the
controller `--mpi-wait poll`, and equal allocation's two runs the same); T_1 is also measured with Open MPI's own
polling (with yield), and the better of the two is T_1, so the controller's gain is never measured against a
handicapped baseline; `--mpi-spin-us` sets how long every sleeping wait polls before its first nap (T_1's, equal
allocation's and the controller's). The 1-minute load average
is printed before and after every run.
With `--app openfoam` the proxy's figures are printed beside OpenFOAM's: by default the recorded proxy run
(bench/results.toml, bench "multiplex"), with --with-proxy the proxy measured in this invocation after OpenFOAM
(about 10 more minutes); the JSON line carries them under "proxy". With `--floor` (openfoam) the same case also
runs under plain mpirun, without miniclusters, alone and in pairs sharing the CPUs or each on its own half of
them: what the machine itself allows the pair (bench/foam_floor.py; its `floor_*` keys join the JSON line).

Run: .venv/bin/python bench/bench_multiplex.py [--app proxy|openfoam] [--iterations N] [--weights W,W,W,W]
     [--rows 192] [--refine 1] [--controller-wait sleep|poll] [--mpi-spin-us US] [--skip-n3] [--beside 1]
     [--with-proxy] [--floor]
     [--save-timeline docs/multiplex-timeline.png]
Prints figures; the last line is one JSON object. It is not a test (no thresholds are asserted).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from docsgen.benchmarks import load as load_results
from docsgen.benchmarks import record_result
from elasticity.control.events import read_events
from elasticity.model.throughput import Geometry, fit_beta
from elasticity.pmpi.env import SPIN_US_MAX
from elasticity.workloads.foam_jobs import JOB_CASE, JOB_WEIGHTS, job_command_line, prepare_job_case
from elasticity.workloads.naca_sweep import final_coefficients
from elasticity.workloads.openfoam import BOUNDARY_CALL
from elasticity.workloads.proxy import build_proxy_solver
from miniclusters.backends.local.backend import LocalBackend
from miniclusters.multiplex.flux_simulations import WAIT_MODE, FluxSimulations
from miniclusters.multiplex.session import wait_settings

MINICLUSTER = str(Path(sys.executable).with_name("minicluster"))
NAME = "benchmux"
RANKS, PODS, POD_CPU_M = 4, 2, 1000
WEIGHTS = "1,1,1,60"
ROWS_PER_WEIGHT = 192
PROXY_ITERATIONS = 1500
FOAM_ITERATIONS = 150
"""T_1 about 24 s polling, 145 s sleeping (16,000 cells, 7 Dec, load 2-5): the whole bench about 9 minutes."""
FOAM_REFINE = 1
FOAM_PROFILE_WINDOWS = 3000
"""MPI_Allreduce windows profiled (about 700 per rhoSimpleFoam iteration at 4 ranks: some 4 iterations)."""
RUN_TIMEOUT = 600.0
"""Seconds a baseline run (no controller) may take before it is called failed."""


@dataclass(frozen=True)
class Workload:
    """What one measurement runs: the simulation's command line and how the controller profiles it."""

    app: str
    command: str
    boundary: str
    profile_iterations: int
    description: str
    sims_root: str = ""
    wait: str = WAIT_MODE
    """How the controller's jobs wait in MPI (`minicluster multiplex --mpi-wait`); equal allocation runs both."""
    spin_us: int | None = None
    """A sleeping wait's spin before its first nap (`--mpi-spin-us`), for every sleeping run; None: the library's."""
    """Where each simulation's own case copy is, below its directory (OpenFOAM: `case`), for Cl/Cd."""


def say(message: str) -> None:
    print(message, flush=True)


def cli(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([MINICLUSTER, *args], capture_output=True, text=True, timeout=timeout)


def write_spec(directory: Path, command: str) -> Path:
    spec = {
        "apiVersion": "miniclusters.dev/v1alpha1",
        "kind": "MiniCluster",
        "metadata": {"name": NAME},
        "spec": {
            "size": PODS,
            "tasks": RANKS,
            "interactive": True,
            "containers": [{"image": "local", "resources": {"requests": {"cpu": f"{POD_CPU_M}m"}}}],
            "multiplexing": {"enabled": True, "command": command, "max": 3},
        },
    }
    path = directory / "benchmux.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


class RunFailed(Exception):
    """A simulation failed (e.g. an MPI rank killed under this shared machine's load): the run is retried once."""


def attempt(what: str, run: Any, *args: Any, recreate: Any = None) -> Any:
    for tries in (1, 2):
        try:
            return run(*args)
        except RunFailed as exc:
            say(f"{what}: {exc}" + ("; recreating the cluster and retrying once" if tries == 1 else ""))
            if tries == 1 and recreate is not None:
                recreate()
    raise SystemExit(f"{what} failed twice")


def equal_run(
    backend: LocalBackend,
    argv: list[str],
    n: int,
    workdir: Path,
    wait: str = WAIT_MODE,
    spin_us: int | None = None,
    timeout: float = RUN_TIMEOUT,
) -> tuple[float, list[float]]:
    """n simulations submitted together at the spec's requests; (wall time, per-simulation makespans)."""
    for index in range(PODS):
        backend.resize(NAME, index, f"{POD_CPU_M}m")
    workdir = Path(tempfile.mkdtemp(prefix=f"{workdir.name}-", dir=workdir.parent))  # fresh files per attempt
    sims = FluxSimulations(
        backend, NAME, argv, RANKS, PODS, workdir, {f"{NAME}-{i}": i for i in range(PODS)}, wait=wait,
        env=wait_settings(spin_us if wait == "sleep" else None),
    )  # fmt: skip
    sims.lead_uri = backend.lead_uri(NAME)
    started = time.monotonic()
    for k in range(n):
        answer = sims.submit(f"eq{n}-{k + 1}", 0)  # no profiler: the rigid baseline
        if not answer.ok:
            raise SystemExit(f"flux submit failed: {answer.reason}")
    ends: dict[str, float] = {}
    while len(ends) < n:
        time.sleep(0.25)
        if time.monotonic() - started > timeout:
            for other in sims.jobs:
                sims.cancel(other, "bench run timed out")
            raise RunFailed(f"not finished after {timeout:.0f} s (finished: {sorted(ends)})")
        for sim, view in sims.observe().items():
            if view.state in ("done", "failed", "cancelled", "timeout") and sim not in ends:
                if view.state != "done":
                    for other in sims.jobs:
                        sims.cancel(other, "bench run failed")
                    raise RunFailed(f"{sim} failed: {view.reason}")
                ends[sim] = time.monotonic() - started
    return max(ends.values()), sorted(ends.values())


def controller_run(n: int, work: Workload, workdir: Path, overhead: str, *extra: str) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix=f"ctl{n}-", dir=workdir))  # fresh files per attempt
    timeline = workdir / f"timeline-n{n}.png"
    spin = ["--mpi-spin-us", str(work.spin_us)] if work.spin_us is not None and work.wait == "sleep" else []
    result = cli(
        "multiplex", NAME, "--command", work.command, "--max", str(n), "--total", str(n), "--json",
        "--timeline", str(timeline), "--workdir", str(workdir / "sims"), "--timeout", "800",
        "--settle", "2", "--interval", "0.5", "--pod-overhead", overhead, "--boundary", work.boundary,
        "--profile-iterations", str(work.profile_iterations), "--mpi-wait", work.wait, *spin, *extra,
    )  # fmt: skip
    if result.returncode != 0:
        raise RunFailed(f"minicluster multiplex failed ({result.returncode}): {result.stderr[-1500:]}")
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    events = list(read_events(timeline.with_suffix(".jsonl")))
    submitted = [e["t"] for e in events if e["kind"] == "submitted"]
    finished = [e["t"] for e in events if e["kind"] == "done"]
    if len(finished) != n:
        raise RunFailed(f"controller run N={n}: {len(finished)} of {n} simulations finished")
    first_end = min(finished)
    totals = [e for e in events if e["kind"] == "resize" and e["t"] < first_end]
    profiled = [e["t"] for e in events if e["kind"] == "profiled"]
    all_profiled = sorted(profiled)[n - 1] if len(profiled) >= n else first_end
    steady = [e["total_m"] for e in totals if e["t"] >= all_profiled] or [e["total_m"] for e in totals[-1:]]
    return {
        "makespan": max(finished) - min(submitted),
        "requested_m": steady[-1] if steady else None,
        "resizes": summary["resizes"],
        "restarts": summary["restarts"],
        "same_pids": summary["same_pids"],
        "timeline": str(timeline),
        "mean_duty": [s.get("mean_duty") for s in summary["simulations"]],
        "sims": workdir / "sims",
    }


def load_now() -> float:
    """The 1-minute load average: every figure is printed with the load it was measured under."""
    return round(os.getloadavg()[0], 2)


def step(what: str, recreate: Any, run: Any, *args: Any) -> Any:
    """One measurement (retried once on a failed run), with the load before and after it."""
    before = load_now()
    result = attempt(what, run, *args, recreate=recreate)
    say(f"  ({what}: load average {before} before, {load_now()} after)")
    return result


def proxy_workload(iterations: int, rows: int, weights: str, profile: int | None) -> Workload:
    solver = build_proxy_solver()
    return Workload(
        "proxy",
        f"{solver} {iterations} 2048 {rows} {weights}",
        "MPI_Barrier",
        profile or 50,
        f"proxy solver, {RANKS} ranks on {PODS} pods, weights {weights} of {rows} rows, {iterations} iterations",
    )


def openfoam_workload(
    iterations: int, weights: list[float], refine: int, workdir: Path, profile: int | None
) -> Workload:
    started = time.monotonic()
    case = prepare_job_case(workdir / "naca0012", iterations, weights, refine=refine)
    layout = ",".join(f"{w:g}" for w in weights)
    say(f"prepared {case.path} ({case.n_cells} cells, concentric rings {layout}) in {time.monotonic() - started:.1f}s")
    return Workload(
        "openfoam",
        job_command_line(case),
        BOUNDARY_CALL,
        profile or FOAM_PROFILE_WINDOWS,
        f"rhoSimpleFoam NACA0012 ({case.n_cells} cells), {RANKS} ranks on {PODS} pods, concentric rings {layout} "
        f"(innermost last), {iterations} iterations",
        sims_root=JOB_CASE,
    )


def coefficients(sims: Path, case_dir: str) -> list[list[float]]:
    """[Cl, Cd] at the last iteration of every simulation the controller ran (OpenFOAM's forceCoeffs)."""
    found = []
    for sim in sorted(p for p in sims.iterdir() if (p / case_dir).is_dir()):
        last = final_coefficients(sim / case_dir)
        found.append([round(last.cl, 6), round(last.cd, 6)])
    return found


def measure(work: Workload, backend: LocalBackend, workdir: Path, opts: argparse.Namespace, recreate: Any) -> Any:
    """T_1, equal allocation and the controller for one workload; its figures (the JSON line's keys)."""
    argv = shlex.split(work.command)
    full = work.app == "proxy"  # the paper's order and N=3: the proxy's figures (issue 15, 27)
    load_start = load_now()
    say(f"workload: {work.description}; load average {load_start}")
    root = workdir / work.app
    root.mkdir()
    t1_sleep, _ = step("T_1", recreate, equal_run, backend, argv, 1, root / "t1", WAIT_MODE, work.spin_us)
    t1_poll, _ = step("T_1 polling", recreate, equal_run, backend, argv, 1, root / "t1poll", "poll")
    t1 = min(t1_sleep, t1_poll)  # the best a simulation does alone: Theta is measured against it
    say(
        f"T_1 (alone, equal allocation {PODS} x {POD_CPU_M}m): {t1:.1f}s (ranks waiting by {WAIT_MODE}: "
        f"{t1_sleep:.1f}s; by Open MPI's polling with yield: {t1_poll:.1f}s)"
    )
    equal2, per_sim = step("equal N=2", recreate, equal_run, backend, argv, 2, root / "equal2", work.wait, work.spin_us)
    theta2_equal = 2 * t1 / equal2
    say(
        f"two at once, equal allocation, ranks waiting by {work.wait}: makespan {equal2:.1f}s (each: {per_sim}), "
        f"Theta(2) = {theta2_equal:.2f}"
    )
    theta2_first = None
    extra: dict[str, int] = {"resizes": 0, "restarts": 0}
    if full:
        first = step(
            "controller N=2, profiled first", recreate, controller_run, 2, work, root, opts.pod_overhead,
            "--profile-together", "1",
        )  # fmt: skip
        theta2_first = 2 * t1 / first["makespan"]
        extra = {"resizes": first["resizes"], "restarts": first["restarts"]}
        say(
            f"controller, N=2, the second packed once the first is profiled: makespan {first['makespan']:.1f}s, "
            f"Theta(2) = {theta2_first:.2f}"
        )
    ctl2 = step("controller N=2", recreate, controller_run, 2, work, root, opts.pod_overhead, "--profile-together", "2")
    theta2 = 2 * t1 / ctl2["makespan"]
    say(
        f"controller, N=2, profiled together, ranks waiting by {work.wait}: makespan {ctl2['makespan']:.1f}s, "
        f"Theta(2) = {theta2:.2f}, requested {ctl2['requested_m']}m while both ran, {ctl2['resizes']} resizes, "
        f"{ctl2['restarts']} restarts, "
        f"pod pids unchanged: {ctl2['same_pids']}; mean duty per simulation {ctl2['mean_duty']}"
    )
    cl_cd = coefficients(ctl2["sims"], work.sims_root) if work.sims_root else None
    if cl_cd is not None:
        say(f"Cl, Cd at the last iteration, per simulation the controller ran: {cl_cd}")
    model = throughput_model(t1, ctl2)
    theta3_measured = None
    if full and not opts.skip_n3:
        # the knee would stop the controller at 2 (that is its job); here the model's prediction is what is
        # checked, so the third simulation is packed whatever the model predicts
        ctl3 = step(
            "controller N=3", recreate, controller_run, 3, work, root, opts.pod_overhead, "--efficiency", "0.01",
            "--profile-together", "3",
        )  # fmt: skip
        theta3_measured = 3 * t1 / ctl3["makespan"]
        extra = {"resizes": extra["resizes"] + ctl3["resizes"], "restarts": extra["restarts"] + ctl3["restarts"]}
        say(
            f"controller, N=3: makespan {ctl3['makespan']:.1f}s, Theta(3) measured = {theta3_measured:.2f} "
            f"(predicted {model['theta3_predicted']:.2f}), requested {ctl3['requested_m']}m, {ctl3['resizes']} resizes"
        )
    cpu_equal = 2 * PODS * POD_CPU_M
    reduction = 1 - (ctl2["requested_m"] or cpu_equal) / cpu_equal
    say(f"requested CPU: proportional {ctl2['requested_m']}m vs equal {cpu_equal}m ({reduction:.0%} less)")
    say(f"timelines: {ctl2['timeline']}")
    if opts.save_timeline is not None:
        shutil.copyfile(ctl2["timeline"], opts.save_timeline)
        say(f"N=2 timeline copied to {opts.save_timeline}")
    return {
        "app": work.app,
        "t1": round(t1, 3),
        "t1_sleep": round(t1_sleep, 3),
        "t1_poll": round(t1_poll, 3),
        "makespan2": round(ctl2["makespan"], 3),
        "theta2": round(theta2, 4),
        "theta2_equal": round(theta2_equal, 4),
        "theta2_profiled_first": None if theta2_first is None else round(theta2_first, 4),
        "cpu_proportional_m": ctl2["requested_m"],
        "cpu_equal_m": cpu_equal,
        "cpu_requested_reduction": round(reduction, 4),
        **model,
        "theta3_measured": None if theta3_measured is None else round(theta3_measured, 4),
        "resizes": ctl2["resizes"] + extra["resizes"],
        "restarts": ctl2["restarts"] + extra["restarts"],
        "beside": opts.beside,
        "controller_wait": work.wait,
        "mpi_spin_us": work.spin_us,
        **({"cl_cd": cl_cd} if cl_cd is not None else {}),
        "load_start": load_start,
        "load_end": load_now(),
    }


def throughput_model(t1: float, ctl2: dict[str, Any]) -> dict[str, float]:
    """beta fitted exactly from (T_1, makespan2) with the profiles' CPU demand u, and Theta(3) predicted by it."""
    geometry = Geometry(RANKS, PODS, len(os.sched_getaffinity(0)) / PODS)  # M pods sharing this machine
    duties = [d for d in ctl2["mean_duty"] if d is not None]
    demand = geometry.demand([sum(duties) / len(duties)] * RANKS) if duties else 0.0
    model = fit_beta([t1, ctl2["makespan"]], geometry, demand)
    line = fit_beta([t1, ctl2["makespan"]], geometry)
    say(
        f"beta (exact from N=2) = {model.beta:.4f}, CPU demand u = {model.demand:.3f} of the cores; Theta(3) "
        f"predicted = {model.theta(3):.2f} (the paper's line, u unknown: {line.theta(3):.2f})"
    )
    return {
        "beta": round(model.beta, 5),
        "demand": round(model.demand, 4),
        "theta3_predicted": round(model.theta(3), 4),
        "theta3_predicted_linear": round(line.theta(3), 4),
    }


PROXY_BESIDE = ("t1", "makespan2", "theta2", "theta2_equal", "cpu_requested_reduction", "restarts", "beside")
"""The proxy's figures printed beside OpenFOAM's."""


def recorded_proxy() -> dict[str, Any] | None:
    """The proxy's figures from its recorded run (bench/results.toml, bench "multiplex"), or None."""
    for bench in load_results():
        if bench.id == "multiplex" and bench.result:
            figures = json.loads(bench.result)
            if "cpu_requested_reduction" not in figures and figures.get("cpu_proportional_m"):
                figures["cpu_requested_reduction"] = round(
                    1 - figures["cpu_proportional_m"] / figures["cpu_equal_m"], 4
                )
            return {key: figures.get(key) for key in PROXY_BESIDE}
    return None


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--app", choices=("proxy", "openfoam"), default="proxy", help="what the simulations run")
    parser.add_argument(
        "--iterations", type=int, help=f"solver iterations [proxy {PROXY_ITERATIONS}, openfoam {FOAM_ITERATIONS}]"
    )
    parser.add_argument(
        "--refine", type=int, default=FOAM_REFINE, help="openfoam: the mesh's cells per direction x this (cells x f^2)"
    )
    parser.add_argument("--rows", type=int, default=ROWS_PER_WEIGHT, help="proxy: rows per unit of band weight")
    parser.add_argument(
        "--weights", help=f"one weight per rank [proxy {WEIGHTS}, openfoam {','.join(f'{w:g}' for w in JOB_WEIGHTS)}]"
    )
    parser.add_argument(
        "--profile-iterations", type=int, help=f"the controller's profile [proxy 50, openfoam {FOAM_PROFILE_WINDOWS}]"
    )
    parser.add_argument("--save-timeline", type=Path, help="copy the N=2 run's timeline PNG here (the docs' one)")
    parser.add_argument("--skip-n3", action="store_true", help="do not run N=3 (theta3_measured is then null)")
    parser.add_argument("--pod-overhead", default="200m", help="the controller's --pod-overhead (broker CPU per pod)")
    parser.add_argument("--beside", type=int, default=0, help="CPU-bound processes running beside, throughout")
    parser.add_argument(
        "--controller-wait", choices=("sleep", "poll"), default=WAIT_MODE, help="the controller's --mpi-wait"
    )
    parser.add_argument(
        "--mpi-spin-us",
        type=int,
        help=f"sleeping waits poll this long before their first nap (0-{SPIN_US_MAX}) [the library's 20]",
    )
    parser.add_argument("--with-proxy", action="store_true", help="openfoam: measure the proxy too, in this run")
    parser.add_argument(
        "--floor",
        action="store_true",
        help="openfoam: also what plain mpirun does here with the same case (bench/foam_floor.py; about 2 minutes)",
    )
    parser.add_argument("--record", action="store_true", help="write the JSON line into bench/results.toml")
    return parser.parse_args(argv)


def check_args(opts: argparse.Namespace) -> list[float]:
    """Every flag checked before anything starts (SystemExit naming the flag); the weights as numbers."""
    if opts.beside < 0:
        raise SystemExit(f"--beside: a number of processes (0 or more) expected, got {opts.beside}")
    for flag, value in (("--iterations", opts.iterations), ("--profile-iterations", opts.profile_iterations)):
        if value is not None and value < 1:
            raise SystemExit(f"{flag}: a positive integer expected, got {value}")
    if opts.refine < 1:
        raise SystemExit(f"--refine: a positive integer expected, got {opts.refine}")
    if opts.rows < 1:
        raise SystemExit(f"--rows: a positive integer expected, got {opts.rows}")
    if opts.mpi_spin_us is not None and not 0 <= opts.mpi_spin_us <= SPIN_US_MAX:
        raise SystemExit(f"--mpi-spin-us: microseconds from 0 to {SPIN_US_MAX} expected, got {opts.mpi_spin_us}")
    if opts.with_proxy and opts.app != "openfoam":
        raise SystemExit("--with-proxy: only with --app openfoam (the proxy is what --app proxy measures)")
    if opts.floor and opts.app != "openfoam":
        raise SystemExit("--floor: only with --app openfoam (the floor runs the OpenFOAM case under plain mpirun)")
    text = opts.weights or (WEIGHTS if opts.app == "proxy" else ",".join(f"{w:g}" for w in JOB_WEIGHTS))
    try:
        weights = [float(w) for w in text.split(",")]
    except ValueError:
        raise SystemExit(f"--weights: {RANKS} comma-separated numbers expected, got {text!r}") from None
    if len(weights) != RANKS or any(not w > 0 for w in weights):
        raise SystemExit(f"--weights: {RANKS} comma-separated positive weights expected, got {text!r}")
    if os.geteuid() != 0:
        raise SystemExit("bench_multiplex needs root (per-pod network namespaces and cgroups)")
    return weights


def main() -> None:
    opts = parse_args()
    weights = check_args(opts)
    state_dir = Path(tempfile.mkdtemp(prefix="mcb", dir="/tmp"))
    os.environ["MINICLUSTERS_STATE_DIR"] = str(state_dir)
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    workdir = Path(tempfile.mkdtemp(prefix="bench-mux-"))
    proxy = proxy_workload(
        opts.iterations if opts.app == "proxy" and opts.iterations else PROXY_ITERATIONS,
        opts.rows,
        opts.weights if opts.app == "proxy" and opts.weights else WEIGHTS,
        opts.profile_iterations if opts.app == "proxy" else None,
    )
    work = proxy
    if opts.app == "openfoam":
        iterations = opts.iterations or FOAM_ITERATIONS
        work = openfoam_workload(iterations, weights, opts.refine, workdir, opts.profile_iterations)
    work = replace(work, wait=opts.controller_wait, spin_us=opts.mpi_spin_us)  # the proxy beside keeps its own
    spec = write_spec(workdir, work.command)

    def recreate() -> None:
        cli("down", NAME)
        up = cli("up", str(spec), "--detach")
        if up.returncode != 0:
            raise SystemExit(f"minicluster up failed: {up.stderr}")

    backend = LocalBackend(state_dir=state_dir, notify=lambda _m: None)
    beside = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(opts.beside)]
    try:
        up = cli("up", str(spec), "--detach")
        if up.returncode != 0:
            raise SystemExit(f"minicluster up failed: {up.stderr}")
        figures = measure(work, backend, workdir, opts, recreate)
        if opts.app == "openfoam":
            figures.update(proxy_beside(proxy, backend, workdir, opts, recreate))
            if opts.floor:
                from foam_floor import measure_floor  # beside this script (bench/ is its sys.path[0])

                figures.update(measure_floor(workdir / "naca0012", RANKS, workdir, say))
        print(json.dumps(figures), flush=True)
        if opts.record:
            record(opts.app, figures)
    finally:
        for process in beside:
            process.kill()
            process.wait()
        cli("down", NAME)
        shutil.rmtree(state_dir, ignore_errors=True)


def proxy_beside(
    proxy: Workload, backend: LocalBackend, workdir: Path, opts: argparse.Namespace, recreate: Any
) -> dict[str, Any]:
    """The proxy's figures beside OpenFOAM's: measured now (--with-proxy) or its recorded run's."""
    if opts.with_proxy:
        opts.skip_n3, opts.save_timeline = True, None  # only the figures printed beside
        measured = measure(proxy, backend, workdir, opts, recreate)
        figures, source = {key: measured.get(key) for key in PROXY_BESIDE}, "measured in this run"
    else:
        found = recorded_proxy()
        if found is None:
            say("proxy: no recorded run in bench/results.toml (run with --with-proxy to measure it here)")
            return {"proxy": None, "proxy_source": None}
        figures, source = found, "recorded (bench/results.toml, bench multiplex)"
    say(
        f"the proxy beside it ({source}): Theta(2) = {figures['theta2']}, equal allocation {figures['theta2_equal']}, "
        f"requested CPU {figures['cpu_requested_reduction'] or 0:.0%} less, T_1 {figures['t1']}s, "
        f"{figures['restarts']} restarts"
    )
    return {"proxy": figures, "proxy_source": source}


def record(app: str, figures: dict[str, Any]) -> None:
    """--record: the proxy's line into bench "multiplex", OpenFOAM's into bench "multiplex_openfoam"."""
    bench_id = "multiplex" if app == "proxy" else "multiplex_openfoam"
    try:
        record_result(bench_id, figures)
    except ValueError as exc:
        raise SystemExit(
            f"--record: {exc}; add a [[bench]] with id = {bench_id!r} to bench/results.toml (title, script, "
            "command, conditions, summary, a table) and record again"
        ) from None


if __name__ == "__main__":
    main()
