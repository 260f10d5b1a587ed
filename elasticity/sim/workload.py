"""Simulator jobs from a trace, and a share of them turned malleable (seeded).

Assumptions, reported with every result (``Workload.notes``):
- a job's size is its requested processors (SWF field 8), else its allocated processors (field 5);
- an unknown requested time (field 9 = -1) is taken to be the job's actual run time (a perfect estimate);
  a requested time below the run time is raised to the run time (jobs are not killed at their limit);
- jobs with an unknown run time or size, or larger than the machine, cannot be replayed and are dropped,
  with their count in the notes;
- submit times are shifted so that the first job arrives at 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from elasticity.model.speedup import (
    DEFAULT_EFFICIENCY_THRESHOLD,
    DEFAULT_MAX_SLOWDOWN,
    Amdahl,
    JobSize,
    size_range,
)
from elasticity.sim.swf import SWFTrace

PERFECT = Amdahl(0.0)
SERIAL_FRACTION_RANGE = (0.005, 0.1)
"""Malleable jobs' Amdahl serial fraction: log-uniform in this range, one draw per job and seed."""


@dataclass(frozen=True, slots=True)
class SimJob:
    job: int
    submit: float
    runtime: float
    """Actual run time at the preferred size."""
    estimate: float
    """Requested time at the preferred size (>= runtime)."""
    size: JobSize
    priority: int = 1
    model: Amdahl = PERFECT


@dataclass(frozen=True)
class Workload:
    name: str
    nodes: int
    jobs: tuple[SimJob, ...]
    notes: tuple[str, ...] = ()


def from_swf(trace: SWFTrace, nodes: int | None = None) -> Workload:
    """Rigid jobs from an SWF trace on ``nodes`` (else the header's MaxProcs/MaxNodes)."""
    machine = nodes if nodes is not None else trace.machine_size
    if machine is None or machine < 1:
        raise ValueError(f"{trace.name}: no MaxProcs/MaxNodes in the header; give the machine size with --nodes")
    unknown = too_big = guessed = raised = 0
    jobs: list[SimJob] = []
    first = min((j.submit for j in trace.jobs if j.submit >= 0), default=0.0)
    for row in trace.jobs:
        size = row.size
        if row.run_time < 0 or size <= 0 or row.submit < 0:
            unknown += 1
            continue
        if size > machine:
            too_big += 1
            continue
        estimate = row.requested_time
        if estimate <= 0:
            guessed += 1
            estimate = row.run_time
        elif estimate < row.run_time:
            raised += 1
            estimate = row.run_time
        jobs.append(SimJob(row.job, row.submit - first, row.run_time, estimate, JobSize.rigid(size)))
    jobs.sort(key=lambda j: (j.submit, j.job))
    notes = [f"machine: {machine} nodes ({'--nodes' if nodes is not None else 'trace header'})"]
    notes.append("job size = requested processors (field 8), else allocated (field 5)")
    if guessed:
        notes.append(f"requested time unknown for {guessed} jobs: assumed equal to the actual run time")
    if raised:
        notes.append(f"requested time below run time for {raised} jobs: raised to the run time")
    if unknown:
        notes.append(f"dropped {unknown} jobs with unknown run time, size or submit time")
    if too_big:
        notes.append(f"dropped {too_big} jobs larger than the machine")
    return Workload(trace.name, machine, tuple(jobs), tuple(notes))


def with_malleable(
    workload: Workload,
    percent: float,
    seed: int,
    *,
    efficiency_threshold: float = DEFAULT_EFFICIENCY_THRESHOLD,
    max_slowdown: float = DEFAULT_MAX_SLOWDOWN,
) -> Workload:
    """``percent`` of the jobs (exactly, rounded; chosen by ``seed``) made malleable with sizes from Amdahl."""
    if not 0 <= percent <= 100:
        raise ValueError(f"malleable share must be within 0..100, got {percent}")
    rng = np.random.default_rng(seed)
    count = len(workload.jobs)
    chosen = rng.permutation(count)[: round(count * percent / 100)]
    low, high = SERIAL_FRACTION_RANGE
    fractions = np.exp(rng.uniform(math.log(low), math.log(high), size=count))
    jobs = list(workload.jobs)
    for index in chosen.tolist():
        job = jobs[index]
        model = Amdahl(float(fractions[index]))
        sizes = size_range(
            model,
            job.size.pref,
            workload.nodes,
            efficiency_threshold=efficiency_threshold,
            max_slowdown=max_slowdown,
        )
        jobs[index] = replace(job, size=sizes, model=model)
    note = (
        f"{percent:g}% malleable (seed {seed}): Amdahl serial fraction log-uniform in "
        f"[{low}, {high}]; pref = requested size, max = largest size with efficiency >= {efficiency_threshold}, "
        f"min = smallest size at most {max_slowdown:g}x slower"
    )
    return replace(workload, jobs=tuple(jobs), notes=(*workload.notes, note))
