"""Simulations as Flux jobs submitted through the lead broker (`flux submit -o pmpi=K`), observed from files.

Each simulation gets a directory under the controller's work directory: the solver's output (its progress
lines: `iteration N`, or OpenFOAM's `Time = N`) and the PMPI traces written after K iterations. The traces say
each rank's duty cycle, host (so which pod) and pid (so the local backend can put the ranks in a per-job
cgroup). The work directory must be visible to the pods and to the controller: the same file system on the
local backend, a shared volume mounted at the same path on Kubernetes.
"""

from __future__ import annotations

import contextlib
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from elasticity.control.multiplex_ports import Submitted
from elasticity.control.multiplex_types import Profile, SimulationView, parse_placement
from miniclusters.backends.base import Backend, BackendError
from miniclusters.operator.multiplex_progress import RunRecord
from miniclusters.trace_profiles import read_job_profile

PROGRESS = re.compile(r"^(?:iteration|Time =)\s*(\d+)\s*$")
#: What the controller applies to every job it launches (bench/bench_mpi_wait.py, docs/multiplexing.md): ranks
#: waiting in MPI sleep (`-o mpi-wait=sleep`, WAIT_MODE) instead of busy-polling the core, calls the wait mode
#: does not cover at least yield it, and separate jobs never meet in shared memory.
MPI_SETTINGS = {"OMPI_MCA_mpi_yield_when_idle": "1", "OMPI_MCA_btl": "tcp,self"}
WAIT_MODE = "sleep"
ENDS = {
    "COMPLETED": "done",
    "FAILED": "failed",
    "CANCELED": "cancelled",
    "CANCELLED": "cancelled",
    "TIMEOUT": "timeout",
}
"""A Flux job's result -> how its simulation ended."""
ERROR_LINES = 3
"""How many lines of a failed simulation's error output its reason quotes."""
LOST = "node-failure"
"""The exception a job gets when a broker running its tasks is lost (flux-core's word, and the built-in one's)."""


@dataclass(frozen=True)
class JobState:
    """What the lead says of one job."""

    status: str
    returncode: str = ""
    exception: str = ""
    """The exception type (e.g. node-failure), empty when none."""
    note: str = ""


def lead_job_states(
    backend: Backend, cluster: str, flux: Sequence[str], lead_uri: str | None = None
) -> dict[str, JobState]:
    """Flux job id -> what the lead says of it: over the lead's socket when this machine has it (the local backend),
    else `flux jobs` run in the lead pod; {} when the lead does not answer this time."""
    if lead_uri is not None:
        return _states_over_socket(lead_uri)
    fields = "{id.f58}\t{status}\t{returncode}\t{exception.type}\t{exception.note}"
    try:
        result = backend.exec(cluster, 0, [*flux, "jobs", "-a", "--format", fields])
    except BackendError:
        return {}
    return parse_jobs(result.stdout)


def _states_over_socket(uri: str) -> dict[str, JobState]:
    from broker.errors import FluxError
    from broker.jobs.api import JobClient

    try:
        with JobClient(uri) as client:
            infos = client.jobs("all")
    except (FluxError, OSError):
        return {}
    return {
        info.f58: JobState(
            info.result if info.state == "INACTIVE" else info.state,
            "" if info.returncode is None else str(info.returncode),
            info.exception_type or "",
            info.exception_note or "",
        )
        for info in infos
    }


def job_reason(job: str, known: JobState, errors: str = "") -> str:
    """ "flux job ID: FAILED rc=N", its exception, and the first lines of its error output."""
    words = f"flux job {job}: {known.status}" + (f" rc={known.returncode}" if known.returncode else "")
    if known.exception:
        words += f"; {known.exception}" + (f": {known.note}" if known.note else "")
    lines = [line.strip() for line in errors.splitlines() if any(c.isalnum() for c in line)][:ERROR_LINES]
    if lines:
        words += "; error: " + " | ".join(lines)
    return words


def parse_jobs(text: str) -> dict[str, JobState]:
    """`flux jobs -a --format "{id.f58}\t{status}\t{returncode}\t{exception.type}\t{exception.note}"`, header
    first; lines without tabs are read as space-separated (id, status, returncode)."""
    out = {}
    for line in text.splitlines()[1:]:
        words = line.split("\t") if "\t" in line else line.split(None, 2)
        words = [w.strip() for w in words]
        if len(words) >= 2 and words[0]:
            out[words[0]] = JobState(*[*words, "", "", ""][1:5])
    return out


def last_iteration(text: str) -> int | None:
    """The last progress counter in a solver's output."""
    found = None
    for line in text.splitlines():
        match = PROGRESS.match(line.strip())
        if match:
            found = int(match.group(1))
    return found


@dataclass
class FluxSimulations:
    """Simulations port over `flux submit/jobs/cancel` run in the lead pod through Backend.exec."""

    backend: Backend
    cluster: str
    command: Sequence[str]
    ranks: int
    nodes: int
    workdir: Path
    pod_of_host: Mapping[str, int]
    equal_per_rank_m: float = 1000.0
    boundary: str = "MPI_Barrier"
    env: Mapping[str, str] = field(default_factory=lambda: dict(MPI_SETTINGS))
    wait: str = WAIT_MODE
    jobs: dict[str, str] = field(default_factory=dict)
    attempts: dict[str, int] = field(default_factory=dict)
    """sim -> how many times it was submitted (a failed one is resubmitted into a fresh directory)."""
    profiles: dict[str, Profile] = field(default_factory=dict)
    pids: dict[str, dict[int, list[int]]] = field(default_factory=dict)
    mean_duty: dict[str, float] = field(default_factory=dict)
    flux: tuple[str, ...] = ("flux",)
    """argv prefix running `flux` against the lead broker (in a Kubernetes pod: at whichever socket it opened)."""
    lead_uri: str | None = None
    """When set (local backend), job states come from the lead broker over its socket instead of a `flux jobs`
    process started in the lead pod at every look, which a pod with a small request cannot afford."""

    def record(self) -> RunRecord:
        """What the next controller needs to go on with this run (operator/multiplex_progress.py)."""
        return RunRecord(str(self.workdir), dict(self.jobs), dict(self.attempts))

    def restore(self, record: RunRecord) -> None:
        """Go on with an earlier controller's run: its directory, its jobs and their attempts."""
        self.workdir = Path(record.run)
        self.jobs = dict(record.jobs)
        self.attempts = dict(record.attempts)

    def sim_dir(self, sim: str) -> Path:
        """The directory of the simulation's current attempt: `<workdir>/<sim>`, then `<sim>-retry<N>`."""
        retries = self.attempts.get(sim, 1) - 1
        return self.workdir / (f"{sim}-retry{retries}" if retries > 0 else sim)

    def submit(self, sim: str, profile_iterations: int) -> Submitted:
        """flux submit in the lead pod; profile_iterations 0 runs without the profiler (baselines). Submitting a
        simulation again (after a failure) starts over in a directory of its own."""
        if sim in self.jobs:
            self.attempts[sim] = self.attempts.get(sim, 1) + 1
            self.profiles.pop(sim, None)  # the new attempt's ranks have other pids: read its traces again
            self.pids.pop(sim, None)
        directory = self.sim_dir(sim)
        try:
            self.prepare(directory / "pmpi")
        except (OSError, BackendError) as exc:
            return Submitted(False, reason=f"preparing {directory}: {exc}")
        profile = (
            ["-o", f"pmpi={profile_iterations}", "-o", f"pmpi-dir={directory / 'pmpi'}",
             "-o", f"pmpi-boundary={self.boundary}"]
            if profile_iterations > 0
            else []
        )  # fmt: skip
        argv = [
            *self.flux, "submit", "-N", str(self.nodes), "-n", str(self.ranks), "-o", "mpi=openmpi", *profile,
            "-o", f"mpi-wait={self.wait}",
            f"--output={directory / 'output.txt'}", f"--error={directory / 'error.txt'}", f"--cwd={directory}",
            f"--job-name={sim}",
            f"--env=MC_PROGRESS_FILE={directory / 'progress.log'}",
            *[f"--env={k}={v}" for k, v in sorted(self.env.items())], *self.command,
        ]  # fmt: skip
        try:
            result = self.backend.exec(self.cluster, 0, argv)
        except BackendError as exc:
            return Submitted(False, reason=str(exc))
        words = result.stdout.split()
        if result.rc != 0 or not words:
            return Submitted(
                False, reason=(result.stderr or result.stdout).strip() or f"flux submit exited {result.rc}"
            )
        self.jobs[sim] = words[-1]
        self.note(sim, "command", shlex.join(argv))
        return Submitted(True, job_id=words[-1])

    def _states(self) -> dict[str, JobState]:
        """job id -> what the lead says of it."""
        return lead_job_states(self.backend, self.cluster, self.flux, self.lead_uri)

    def observe(self) -> dict[str, SimulationView]:
        states = self._states()
        views = {}
        for sim, job in self.jobs.items():
            known = states.get(job, JobState("PENDING"))
            state = ENDS.get(known.status) or (
                "running" if known.status in ("RUN", "RUNNING", "CLEANUP") else "pending"
            )
            iterations = self._iterations(sim)
            if state == "running" and iterations is None:
                iterations = 0
            reason = self._reason(sim, job, known) if state in ENDS.values() else ""
            lost = state == "failed" and known.exception == LOST
            views[sim] = SimulationView(sim, state, iterations, self._profile(sim), reason, lost)  # type: ignore[arg-type]
        return views

    def _reason(self, sim: str, job: str, known: JobState) -> str:
        text = ""
        if known.status != "COMPLETED":
            with contextlib.suppress(OSError):
                text = self.read_text(self.sim_dir(sim) / "error.txt")
        return job_reason(job, known, text)

    def _iterations(self, sim: str) -> int | None:
        """Progress from the file the solver appends to while it runs (MC_PROGRESS_FILE), else its output."""
        for name in ("progress.log", "output.txt"):
            try:
                found = last_iteration(self.read_text(self.sim_dir(sim) / name))
            except OSError:
                continue
            if found is not None:
                return found
        return None

    def _profile(self, sim: str) -> Profile | None:
        """The profile once every rank wrote its trace (after K iterations), cached."""
        if sim in self.profiles:
            return self.profiles[sim]
        found = read_job_profile(
            self.trace_dir(sim), self.ranks, self.boundary, self.equal_per_rank_m, pod_of_host=self.pod_of_host
        )
        if found is None:
            return None  # a trace still being written: next time
        placement = parse_placement([t.hostname for t in found.traces], self.pod_of_host)
        self.pids[sim] = found.pids_by_pod()
        duty = found.duty
        self.mean_duty[sim] = sum(duty) / len(duty)
        self.profiles[sim] = Profile(duty, placement, iteration_rate=found.analysis.steady_rate)
        return self.profiles[sim]

    def cancel(self, sim: str, reason: str) -> None:
        job = self.jobs.get(sim)
        if job is None:
            return
        with contextlib.suppress(BackendError):
            self.backend.exec(self.cluster, 0, [*self.flux, "cancel", job])
        with contextlib.suppress(OSError):  # a record only: the cancel is what matters
            self.note(sim, "cancelled", reason)

    # Files: the pods and this process share the work directory here; ExecSimulations reaches them by exec.
    def prepare(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)

    def note(self, sim: str, name: str, text: str) -> None:
        """Keep a record beside the simulation's output (its command, why it was cancelled)."""
        (self.sim_dir(sim) / name).write_text(text + "\n")

    def read_text(self, path: Path) -> str:
        return path.read_text(errors="replace")

    def trace_dir(self, sim: str) -> Path:
        """A directory of this machine holding the simulation's PMPI traces (pmpi.*.bin) written so far."""
        return self.sim_dir(sim) / "pmpi"

    def pids_of(self, sim: str) -> dict[int, list[int]]:
        return self.pids.get(sim, {})
