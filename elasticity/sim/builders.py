"""Small hand-written workloads (tests, examples, the live pool's dry runs)."""

from __future__ import annotations

from elasticity.model.speedup import Amdahl, JobSize
from elasticity.sim.workload import SimJob, Workload


def rigid_job(job: int, submit: float, nodes: int, runtime: float, estimate: float | None = None) -> SimJob:
    return SimJob(job, submit, runtime, runtime if estimate is None else estimate, JobSize.rigid(nodes))


def malleable_job(
    job: int,
    submit: float,
    size: tuple[int, int, int],
    runtime: float,
    *,
    serial: float = 0.0,
    priority: int = 1,
) -> SimJob:
    """``size`` = (min, pref, max); ``runtime`` is at the preferred size."""
    return SimJob(job, submit, runtime, runtime, JobSize(*size), priority, Amdahl(serial))


def workload(nodes: int, *jobs: SimJob, name: str = "hand") -> Workload:
    return Workload(name, nodes, tuple(jobs))
