"""`minicluster profile` minus the CLI: run a command under the profiler, analyze, propose requests.

Running through the broker's job manager (`flux submit -o pmpi`) is not here yet; this runs a local
command (typically `mpirun ...`) with the profiler preloaded, or analyzes traces already on disk.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from elasticity.model.cpu import Formula
from elasticity.pmpi.build import build_pmpi_library
from elasticity.pmpi.env import pmpi_environment
from elasticity.policy.cpu_allocation import (
    AllocationPlan,
    Mode,
    allocate_pod_requests,
    placement_from_hostnames,
    rank_needs_millicores,
)
from elasticity.profiling.duty_cycle import (
    DEFAULT_BOUNDARY_CALL,
    DEFAULT_SKIP_FRACTION,
    DutyCycleAnalysis,
    analyze_job,
)
from elasticity.profiling.trace import find_trace_files, read_job_traces


@dataclass(frozen=True)
class ProfiledRun:
    """A finished command and where its traces are."""

    command: tuple[str, ...]
    returncode: int
    trace_dir: Path
    jobid: str
    stdout: str
    stderr: str


def run_profiled(
    command: Sequence[str],
    trace_dir: Path | str,
    *,
    jobid: str | None = None,
    iterations: int | None = None,
    boundary_call: str = DEFAULT_BOUNDARY_CALL,
    library: Path | str | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
) -> ProfiledRun:
    """Run `command` with the profiler preloaded; traces land in trace_dir as pmpi.<jobid>.<rank>.bin.

    Local mpirun passes its environment to its ranks; a multi-node launcher must forward the
    variables in elasticity.pmpi.env.PMPI_VARIABLES itself (e.g. `mpirun -x`).
    """
    trace_dir = Path(trace_dir)
    trace_dir.mkdir(parents=True, exist_ok=True)
    lib = Path(library) if library is not None else build_pmpi_library()
    job = jobid or f"run{os.getpid()}"
    run_env = pmpi_environment(lib, trace_dir, jobid=job, iterations=iterations, boundary_call=boundary_call, base=env)
    proc = subprocess.run(list(command), env=run_env, capture_output=True, text=True, timeout=timeout, check=False)
    return ProfiledRun(tuple(command), proc.returncode, trace_dir, job, proc.stdout, proc.stderr)


@dataclass(frozen=True)
class ProfileResult:
    """Duty cycles of one job and the per-pod requests they imply."""

    analysis: DutyCycleAnalysis
    plan: AllocationPlan
    placement: dict[str, list[int]]


def profile_traces(
    trace_dir: Path | str,
    *,
    jobid: str | None = None,
    boundary_call: str = DEFAULT_BOUNDARY_CALL,
    skip_fraction: float = DEFAULT_SKIP_FRACTION,
    iterations: int | None = None,
    allocation_millicores: float | Sequence[float] | np.ndarray = 1000.0,
    placement: Mapping[str, Sequence[int]] | None = None,
    headroom: float = 1.0,
    floor_millicores: int = 10,
    ceiling_millicores: int | None = None,
    budget_millicores: int | None = None,
    mode: Mode = "proportional",
    formula: Formula = "v2-nonlinear",
) -> ProfileResult:
    """Read one job's traces, compute duty cycles and propose per-pod requests.

    Without `placement`, each distinct hostname in the traces is a pod (one broker per pod).
    """
    if jobid is None:
        groups = find_trace_files(trace_dir)
        if len(groups) > 1:
            # Several jobs in one directory: take the newest, as `minicluster profile` just ran it.
            jobid = max(groups, key=lambda j: max(p.stat().st_mtime for p in groups[j]))
    traces = read_job_traces(trace_dir, jobid=jobid)
    analysis = analyze_job(traces, boundary_call, skip_fraction, allocation_millicores, iterations)
    where = (
        {k: list(v) for k, v in placement.items()}
        if placement is not None
        else placement_from_hostnames([t.hostname for t in traces])
    )
    needs = rank_needs_millicores(analysis.duty, analysis.allocation_millicores, headroom)
    plan = allocate_pod_requests(
        needs,
        where,
        floor_millicores=floor_millicores,
        ceiling_millicores=ceiling_millicores,
        budget_millicores=budget_millicores,
        mode=mode,
        formula=formula,
    )
    return ProfileResult(analysis=analysis, plan=plan, placement=where)
