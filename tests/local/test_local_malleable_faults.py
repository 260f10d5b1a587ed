"""The malleable contract's faults on real jobs (issue 44): a job whose rank is killed while it resizes fails in
bounded time with a reason naming the resize, and a job that ignores its resize keeps its size, finishes with its
rigid run's answer, and the job that waited for its nodes still runs. The loop and the Flux port are the ones
`minicluster up` uses; a wrapper around the port injects the fault when the loop asks for the resize."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from elasticity.control.malleable import LiveJob, MalleableLoop, Observation
from elasticity.model.speedup import Amdahl, JobSize
from elasticity.policy.scheduling.registry import policy_named
from elasticity.workloads.malleable_jacobi import build_malleable_jacobi
from miniclusters.backends.local.backend import LocalBackend
from miniclusters.malleable.flux_jobs import FluxMalleableJobs, SolverShape
from miniclusters.malleable.session import rigid_answer

pytestmark = pytest.mark.needs_root

JOBS = (
    LiveJob(0, "j01", 0.0, JobSize(1, 2, 2), 12.0, 12.0, 1, Amdahl(0.0)),
    LiveJob(1, "j02", 2.0, JobSize.rigid(1), 3.0, 3.0, 1, Amdahl(0.0)),
)
"""j01 runs on both nodes; j02 arrives at 2 s and needs one: the policy (min) shrinks j01 to start it."""
SHAPE = SolverShape(32, 120)


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


@dataclass
class KillingRank:
    """Kills one of the job's ranks (SIGKILL) as the loop asks it to resize, then asks."""

    port: FluxMalleableJobs

    def submit(self, job: LiveJob, nodes: int) -> None:
        self.port.submit(job, nodes)

    def observe(self, job: LiveJob) -> Observation:
        return self.port.observe(job)

    def resize(self, job: LiveJob) -> bool:
        if not self.port.started(job):
            return False
        found = subprocess.run(["pgrep", "-f", str(self.port.job_dir(job))], capture_output=True, text=True)
        ranks = [int(pid) for pid in found.stdout.split() if _comm(int(pid)).startswith("malleable_jac")]
        assert ranks, "the job's ranks are running"
        os.kill(ranks[-1], signal.SIGKILL)
        return self.port.resize(job)


@dataclass
class Ignoring(KillingRank):
    """A job that ignores its resize: the request is never delivered."""

    def resize(self, job: LiveJob) -> bool:
        return self.port.started(job)


def _loop(backend: LocalBackend, work: Path, wrap: Callable[[FluxMalleableJobs], Any], timeout: float) -> MalleableLoop:
    shapes = {job.name: SHAPE for job in JOBS}
    port = FluxMalleableJobs(backend, "mf", build_malleable_jacobi(), work, shapes=shapes)
    port.lead_uri = backend.lead_uri("mf")
    return MalleableLoop(JOBS, 2, policy_named("min"), wrap(port), "min", timeout)


@pytest.fixture
def cluster(mc: Any, machine: Any, spec_writer: Any) -> None:
    spec = spec_writer(machine.state_dir, "mf", size=2, max_size=2, cpu=None)
    up = mc("up", str(spec), "--detach")
    assert up.returncode == 0, up.stdout + up.stderr


def test_a_rank_killed_while_the_job_resizes_fails_it_naming_the_resize(
    cluster: None, backend: LocalBackend, tmp_path: Path
) -> None:
    loop = _loop(backend, tmp_path, KillingRank, timeout=30.0)
    loop.run(interval=0.2, limit=90.0)
    first, second = loop.states[0], loop.states[1]
    assert first.phase == "failed", (first.phase, first.reason)
    assert first.reason.startswith("failed while resizing from 2 to 1 nodes: flux job "), first.reason
    assert second.phase == "done", "the job that waited for the nodes still ran"  # within the loop's limit


def test_a_job_that_ignores_its_resize_keeps_its_size_and_its_answer(
    cluster: None, backend: LocalBackend, tmp_path: Path
) -> None:
    loop = _loop(backend, tmp_path, Ignoring, timeout=2.0)
    loop.run(interval=0.2, limit=90.0)
    first, second = loop.states[0], loop.states[1]
    assert first.phase == second.phase == "done", (first.reason, second.reason)
    assert first.ignored and first.final == 2 and first.shrinks == first.expands == 0
    assert second.start >= first.end - 0.5, "j02 started once j01 gave its nodes back"
    port = loop.port.port  # type: ignore[attr-defined]
    assert port.answer(first.job) == rigid_answer(build_malleable_jacobi(), SHAPE)
    assert [n for _, n in port.submissions["j01"]] == [2], "never restarted"
