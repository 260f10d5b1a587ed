"""The live malleable loop's port over Flux: each job is the malleable Jacobi solver, submitted through the lead
broker with its malleable contract (broker/jobs/malleable.py), resized by `flux job kill --signal`, observed from
the lead's job list and the solver's state directory (elasticity/workloads/malleable_jacobi.py).

Each job has a directory under the run's work directory, which the pods and the controller both see (the same
file system on the local backend, a shared volume on podman and Kubernetes): the checkpoint that carries it
from one size to the next, its progress, its answer, and one output and error file per submission.
"""

from __future__ import annotations

import contextlib
import math
import shlex
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from elasticity.control.malleable import LiveJob, Observation, Phase
from elasticity.workloads.malleable_jacobi import (
    PROGRESS_FILE,
    STATUS_FILE,
    jacobi_arguments,
    read_answer,
    read_progress,
    read_status,
)
from miniclusters.backends.base import Backend, BackendError
from miniclusters.multiplex.flux_simulations import ENDS, MPI_SETTINGS, JobState, job_reason, lead_job_states

STATES_TTL = 0.25
"""Seconds one look at the lead's job list serves: the loop observes every job at each tick."""
EXEC_STATES_TTL = 1.0
"""The same when each look is an exec into the lead pod (podman, Kubernetes)."""


@dataclass(frozen=True)
class SolverShape:
    """What every job computes: the grid and iterations of the Jacobi solver (the answer depends on nothing else)."""

    grid: int = 64
    iterations: int = 400


@dataclass
class FluxMalleableJobs:
    backend: Backend
    cluster: str
    solver: Path
    """The built solver, at a path the pods see."""
    workdir: Path
    shapes: Mapping[str, SolverShape] = field(default_factory=dict)
    """job name -> its problem (default: SolverShape())."""
    flux: tuple[str, ...] = ("flux",)
    lead_uri: str | None = None
    """When set (local backend), job states come from the lead broker over its socket."""
    env: Mapping[str, str] = field(default_factory=lambda: dict(MPI_SETTINGS))
    clock: Callable[[], float] = time.monotonic
    jobs: dict[str, str] = field(default_factory=dict)
    """job name -> the Flux job id of its latest submission."""
    submissions: dict[str, list[tuple[str, int]]] = field(default_factory=dict)
    """job name -> (Flux job id, nodes) of every submission, first to last."""
    refused: dict[str, str] = field(default_factory=dict)
    submitted: dict[str, float] = field(default_factory=dict)
    """job name -> wall time of its latest submission."""
    _states: dict[str, JobState] = field(default_factory=dict)
    _looked: float = -1e18

    def job_dir(self, job: LiveJob) -> Path:
        return self.workdir / job.name

    def shape(self, job: LiveJob) -> SolverShape:
        return self.shapes.get(job.name, SolverShape())

    def pace_ms(self, job: LiveJob) -> float:
        """Milliseconds per iteration on one node, so the job runs `job.runtime` seconds at its preferred size."""
        one_node = job.runtime * job.model.speedup(job.size.pref)
        return one_node * 1000.0 / self.shape(job).iterations

    def argv(self, job: LiveJob, nodes: int) -> list[str]:
        directory = self.job_dir(job)
        attempt = len(self.submissions.get(job.name, ()))
        contract = [
            f"--setattr=malleable.min={job.size.min}", f"--setattr=malleable.pref={job.size.pref}",
            f"--setattr=malleable.max={job.size.max}",
        ]  # fmt: skip
        shape = self.shape(job)
        solver = jacobi_arguments(shape.grid, shape.iterations, directory, self.pace_ms(job), job.model.serial_fraction)
        return [
            *self.flux, "submit", "-N", str(nodes), "-n", str(nodes), "--exclusive", "-o", "mpi=openmpi", *contract,
            f"--job-name={job.name}", f"--cwd={directory}",
            f"--output={directory / f'output.{attempt}.txt'}", f"--error={directory / f'error.{attempt}.txt'}",
            *[f"--env={k}={v}" for k, v in sorted(self.env.items())], str(self.solver), *solver,
        ]  # fmt: skip

    def submit(self, job: LiveJob, nodes: int) -> None:
        directory = self.job_dir(job)
        argv = self.argv(job, nodes)
        try:
            directory.mkdir(parents=True, exist_ok=True)
            (directory / STATUS_FILE).unlink(missing_ok=True)  # this submission's end writes it again
            started = time.time() - 0.01  # the progress file's clock: mtimes are wall time
            result = self.backend.exec(self.cluster, 0, argv)
        except (OSError, BackendError) as exc:
            self.refused[job.name] = f"submitting on {nodes} nodes: {exc}"
            return
        words = result.stdout.split()
        if result.rc != 0 or not words:
            self.refused[job.name] = (result.stderr or result.stdout).strip() or f"flux submit exited {result.rc}"
            return
        self.jobs[job.name] = words[-1]
        self.submitted[job.name] = started
        self.submissions.setdefault(job.name, []).append((words[-1], nodes))
        self._looked = -1e18  # the next look sees the new job
        with contextlib.suppress(OSError), (directory / "commands.txt").open("a") as out:
            out.write(shlex.join(argv) + "\n")

    def started(self, job: LiveJob) -> bool:
        """The latest submission's ranks are all up: its solver wrote its progress after MPI_Init (a signal before
        that reaches mpirun while it is still launching, which ends the job instead of forwarding it)."""
        try:
            written = (self.job_dir(job) / PROGRESS_FILE).stat().st_mtime
        except OSError:
            return False
        return written >= self.submitted.get(job.name, math.inf)

    def resize(self, job: LiveJob) -> bool:
        flux_id = self.jobs.get(job.name)
        if flux_id is None or not self.started(job):
            return False
        try:
            result = self.backend.exec(self.cluster, 0, [*self.flux, "job", "kill", "--signal=SIGUSR1", flux_id])
        except BackendError:
            return False
        return result.rc == 0

    def observe(self, job: LiveJob) -> Observation:
        if job.name in self.refused:
            return Observation(Phase.FAILED, 0.0, self.refused[job.name])
        directory = self.job_dir(job)
        progress = min(1.0, read_progress(directory) / self.shape(job).iterations)
        flux_id = self.jobs.get(job.name)
        known = self.states().get(flux_id or "", JobState("PENDING"))
        end = ENDS.get(known.status)
        if end is None:
            running = known.status in ("RUN", "RUNNING", "CLEANUP")
            return Observation(Phase.RUNNING if running else Phase.PENDING, progress)
        status = read_status(directory)
        if end == "done" and status.kind == "done":
            return Observation(Phase.DONE, 1.0)
        if end == "done" and status.kind == "checkpoint":
            return Observation(Phase.CHECKPOINTED, progress)
        return Observation(Phase.FAILED, progress, self._reason(job, flux_id or "?", known))

    def answer(self, job: LiveJob) -> str | None:
        return read_answer(self.job_dir(job))

    def states(self) -> dict[str, JobState]:
        """Flux job id -> what the lead says of it, looked up at most every STATES_TTL seconds."""
        now = self.clock()
        if now - self._looked >= (STATES_TTL if self.lead_uri is not None else EXEC_STATES_TTL):
            self._states, self._looked = lead_job_states(self.backend, self.cluster, self.flux, self.lead_uri), now
        return self._states

    def _reason(self, job: LiveJob, flux_id: str, known: JobState) -> str:
        attempt = len(self.submissions.get(job.name, ())) - 1
        text = ""
        with contextlib.suppress(OSError):
            text = (self.job_dir(job) / f"error.{attempt}.txt").read_text(errors="replace")
        return job_reason(flux_id, known, text)

    def cancel_all(self, names: Sequence[str] = ()) -> None:
        """Cancel the jobs still in the instance (an interrupted run leaves none behind)."""
        for name, flux_id in self.jobs.items():
            if not names or name in names:
                with contextlib.suppress(BackendError):
                    self.backend.exec(self.cluster, 0, [*self.flux, "cancel", flux_id])
