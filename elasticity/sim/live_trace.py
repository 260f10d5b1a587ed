"""A trace scaled to a live run: a window of consecutive jobs from a real trace, on a few nodes, in minutes.

How (stated in the workload's notes): the window's jobs keep their order and their relative sizes, arrivals and
run times; sizes are scaled from the trace's machine to ``nodes`` (rounded up, at least 1); arrivals are
compressed so the window arrives within ``arrivals`` seconds; run times are scaled so the window's median is
``median_runtime`` seconds, then clipped to ``[runtime_min, runtime_max]`` (a live run is minutes, not months).
Requested times keep their ratio to run times.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import replace

from elasticity.model.speedup import JobSize
from elasticity.sim.swf import SWFTrace
from elasticity.sim.workload import SimJob, Workload, from_swf


def scaled_window(
    trace: SWFTrace,
    *,
    jobs: int = 16,
    first: int = 0,
    nodes: int = 8,
    arrivals: float = 60.0,
    median_runtime: float = 40.0,
    runtime_min: float = 10.0,
    runtime_max: float = 120.0,
) -> Workload:
    """``jobs`` consecutive jobs from the ``first``-th, scaled to ``nodes`` nodes and minutes of run time."""
    if jobs < 1 or first < 0 or nodes < 1:
        raise ValueError(f"need jobs >= 1, first >= 0 and nodes >= 1 (got {jobs}, {first}, {nodes})")
    if not 0 < runtime_min <= median_runtime <= runtime_max or arrivals < 0:
        raise ValueError("need 0 < runtime_min <= median_runtime <= runtime_max and arrivals >= 0")
    whole = from_swf(trace)
    window = whole.jobs[first : first + jobs]
    if len(window) < jobs:
        raise ValueError(f"{trace.name} has {len(whole.jobs)} usable jobs; cannot take {jobs} from the {first}th")
    start, span = window[0].submit, (window[-1].submit - window[0].submit) or 1.0
    scale = median_runtime / statistics.median(job.runtime for job in window)
    out = []
    for job in window:
        runtime = min(runtime_max, max(runtime_min, job.runtime * scale))
        size = max(1, min(nodes, math.ceil(job.size.pref * nodes / whole.nodes)))
        submit = (job.submit - start) / span * arrivals
        estimate = runtime * (job.estimate / job.runtime if job.runtime > 0 else 1.0)
        out.append(replace(job, submit=submit, runtime=runtime, estimate=estimate, size=JobSize.rigid(size)))
    note = (
        f"{trace.name}: jobs {first + 1}-{first + jobs} of the usable ones, sizes scaled from {whole.nodes} to "
        f"{nodes} nodes (rounded up), arrivals within {arrivals:g} s, run times scaled to a median of "
        f"{median_runtime:g} s and clipped to [{runtime_min:g}, {runtime_max:g}] s"
    )
    name = f"{trace.name}-{jobs}@{first}"
    return Workload(name, nodes, tuple(out), (*whole.notes[:1], note))


__all__ = ["SimJob", "scaled_window"]
