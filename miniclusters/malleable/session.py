"""Wire the live malleable loop to a running MiniCluster: the workload from its spec, the solver, the Flux port,
the event log; run it and report it as the simulator reports a run, each job's answer checked against a rigid
run of the same problem.
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from elasticity.control.events import EventLog
from elasticity.control.malleable import LiveJob, MalleableLoop
from elasticity.policy.scheduling.registry import policy_named
from elasticity.sim.engine import SimResult
from elasticity.sim.live import live_jobs, live_result
from elasticity.sim.live_trace import scaled_window
from elasticity.sim.swf import read_swf
from elasticity.sim.traces import trace_path
from elasticity.sim.workload import Workload, with_malleable
from elasticity.workloads.malleable_jacobi import build_malleable_jacobi, jacobi_arguments, read_answer
from miniclusters import workdirs
from miniclusters.api.malleable import MalleableRunSpec
from miniclusters.api.spec import MiniCluster
from miniclusters.backends.base import Backend
from miniclusters.malleable.flux_jobs import FluxMalleableJobs, SolverShape

IMAGE_SOLVER = Path("/usr/local/bin/malleable_jacobi")
"""The solver in the application image (images/openmpi-openfoam), for pods in containers."""
GRIDS = (32, 40, 48, 56, 64)
"""Each job solves its own grid (by its place in the workload), so each has an answer of its own to check."""


def live_workload(spec: MalleableRunSpec, nodes: int) -> Workload:
    """The spec's window of its trace, scaled to `nodes` nodes and minutes, with its share made malleable."""
    window = scaled_window(
        read_swf(trace_path(spec.trace)), jobs=spec.jobs, first=spec.first, nodes=nodes, arrivals=spec.arrivals,
        median_runtime=spec.median_runtime, runtime_min=spec.runtime_min, runtime_max=spec.runtime_max,
    )  # fmt: skip
    return with_malleable(window, spec.malleable_percent, spec.seed)


def shape_of(job: LiveJob, iterations: int) -> SolverShape:
    return SolverShape(GRIDS[job.index % len(GRIDS)], iterations)


def base_workdir(mc: MiniCluster) -> Path:
    """The run's work directory; each policy's run gets its own folder in it."""
    spec = mc.spec.malleable
    assert spec is not None
    return workdirs.workdir_for("malleable", mc.name, spec.workdir)


def claim_workdir(mc: MiniCluster) -> Path:
    """The work directory checked to be ours, created and marked (miniclusters/workdirs.py), or SpecError naming
    spec.malleable.workdir: a directory of someone else's files is refused before anything is written there."""
    spec = mc.spec.malleable
    assert spec is not None
    return workdirs.claim(base_workdir(mc), "spec.malleable.workdir", mc.name, "malleable", ours=not spec.workdir)


def in_containers(mc: MiniCluster) -> MiniCluster:
    """The spec with the work directory mounted at the same path in every pod: the checkpoint rank 0 writes in one
    pod is read by rank 0 of the restart, in whichever pod it lands, and the controller reads the files here."""
    from miniclusters.campaign.session import with_shared_workdir

    return with_shared_workdir(mc, claim_workdir(mc))


def rigid_answer(solver: Path, shape: SolverShape) -> str | None:
    """The answer of a rigid one-rank run of `shape`, unpaced: what every resized run must reproduce."""
    with tempfile.TemporaryDirectory(prefix="malleable-rigid-") as directory:
        argv = [str(solver), *jacobi_arguments(shape.grid, shape.iterations, directory)]
        subprocess.run(argv, capture_output=True, timeout=300, check=False)  # an Open MPI singleton
        return read_answer(Path(directory))


@dataclass
class LiveRun:
    loop: MalleableLoop
    port: FluxMalleableJobs
    workload: Workload
    result: SimResult
    answers: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)
    """job -> (its answer, the rigid run's)."""

    @property
    def answers_equal(self) -> bool:
        return bool(self.answers) and all(got is not None and got == want for got, want in self.answers.values())


def run_live(
    backend: Backend,
    mc: MiniCluster,
    say: Callable[[str], None],
    policy: str | None = None,
    limit: float = 3600.0,
    containers: bool = False,
    flux: tuple[str, ...] = ("flux",),
) -> LiveRun:
    """Run the spec's trace live on the running MiniCluster `mc` under `policy` (default: the spec's); in
    `containers` (podman, Kubernetes) the pods run the image's solver and share the work directory (`in_containers`);
    `flux` runs `flux` in the lead pod."""
    spec = mc.spec.malleable
    assert spec is not None
    name = policy or spec.policy
    workload = live_workload(spec, mc.spec.size)
    base = claim_workdir(mc)
    workdir = base / name
    workdirs.remove_tree(workdir, base)  # our earlier run's checkpoints would resume it
    workdir.mkdir(parents=True)
    solver = build_malleable_jacobi()
    jobs = live_jobs(workload)
    shapes = {job.name: shape_of(job, spec.iterations) for job in jobs}
    port = FluxMalleableJobs(
        backend, mc.name, IMAGE_SOLVER if containers else solver, workdir, shapes=shapes, flux=flux
    )
    lead_uri = getattr(backend, "lead_uri", None)
    if lead_uri is not None:
        port.lead_uri = lead_uri(mc.name)
    with EventLog(workdir / "events.jsonl", "malleable", time.time) as log:
        loop = MalleableLoop(jobs, mc.spec.size, policy_named(name), port, name, spec.resize_timeout, log=log)
        say(f"malleable: {len(jobs)} jobs of {workload.name} on {mc.spec.size} nodes under {name}; work in {workdir}")
        try:
            while not loop.finished and loop.now() < limit:
                for line in loop.step():
                    say(f"  {loop.now():7.1f}s  {line}")
                time.sleep(0.25)
        finally:
            if not loop.finished:
                port.cancel_all()
    answers = {job.name: (port.answer(job), rigid_answer(solver, shapes[job.name])) for job in jobs}
    return LiveRun(loop, port, workload, live_result(loop, workload), answers)
