"""A job's PMPI traces read whole into what the controllers use: each rank's duty cycle and pod.

One step shared by the multiplexing controller (multiplex/flux_simulations.py) and the campaign's observer
(campaign/observe.py): a job is profiled only once every rank has written its trace, and a trace still being
written, or a rank on a host that is not one of the cluster's pods, means "not yet" rather than an error.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from elasticity.profiling.duty_cycle import DutyCycleAnalysis, analyze_job
from elasticity.profiling.trace import RankTrace, TraceFormatError, read_job_traces

TRACE_GLOB = "pmpi.*.bin"
"""One file per rank, as the PMPI profiler writes them."""


@dataclass(frozen=True)
class JobProfile:
    """Every rank's trace, their duty-cycle analysis, and the pod each rank ran on."""

    traces: tuple[RankTrace, ...]
    analysis: DutyCycleAnalysis
    pods: tuple[int, ...]

    @property
    def duty(self) -> tuple[float, ...]:
        return tuple(float(d) for d in self.analysis.duty)

    def pids_by_pod(self) -> dict[int, list[int]]:
        """pod -> the pids of its ranks (the local backend puts them in a per-job cgroup)."""
        pids: dict[int, list[int]] = {}
        for pod, trace in zip(self.pods, self.traces, strict=True):
            pids.setdefault(pod, []).append(trace.pid)
        return pids


def read_job_profile(
    folder: Path, ranks: int, boundary: str, allocation_millicores: float, pod_of_host: Mapping[str, int]
) -> JobProfile | None:
    """The profile of the job whose traces are in `folder`, once all `ranks` wrote theirs; None until then."""
    if len(list(folder.glob(TRACE_GLOB))) < ranks:
        return None
    try:
        traces = tuple(read_job_traces(folder))
        analysis = analyze_job(traces, boundary_call=boundary, allocation_millicores=allocation_millicores)
        pods = tuple(pod_of_host[t.hostname] for t in traces)
    except (TraceFormatError, ValueError, OSError, KeyError):
        return None  # still being written, or a host that is not ours: next time
    return JobProfile(traces, analysis, pods)
