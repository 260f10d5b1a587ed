"""A forced scale-down while jobs run on the removed pods loses nothing: a job that allows requeueing goes back
to the queue (and runs again once it fits), one that does not fails with the reason; a drained scale-down
(the autoscaler's path) lets them finish -- see test_local_autoscale.py."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from broker.jobs.jobid import parse_jobid
from miniclusters.backends.local.backend import LocalBackend


@pytest.mark.needs_root
def test_scale_down_requeues_or_fails_with_a_reason(
    mc: Callable[..., subprocess.CompletedProcess[str]],
    backend: LocalBackend,
    spec_writer: Callable[..., Path],
    waiter: Callable[..., Any],
    tmp_path: Path,
) -> None:
    spec = spec_writer(tmp_path, "shrink", size=2, max_size=2, min_size=1)
    assert mc("up", str(spec), timeout=120).returncode == 0

    def flux(*argv: str) -> str:
        result = mc("exec", "shrink", "--", "flux", *argv)
        assert result.returncode == 0, result.stderr
        return result.stdout.strip()

    def job(jobid: str) -> dict[str, Any]:
        jobs = json.loads(flux("jobs", "-a", "--json"))
        records = jobs["jobs"] if isinstance(jobs, dict) else jobs
        return next(j for j in records if int(j["id"]) == parse_jobid(jobid))

    requeued = flux("submit", "-N", "2", "--setattr", "requeue=1", "sleep", "300")
    failing = flux("submit", "-N", "2", "sleep", "300")
    assert waiter(lambda: job(requeued)["state"] == "RUN", timeout=30)
    assert mc("scale", "shrink", "1").returncode == 0
    # The requeued job waits for 2 nodes again; the other failed and says why.
    assert waiter(lambda: job(failing)["state"] == "INACTIVE", timeout=30)
    lost = job(failing)
    assert lost["result"] != "COMPLETED" and "lost contact with broker rank 1" in json.dumps(lost)
    assert waiter(lambda: job(requeued)["state"] == "SCHED", timeout=30)
    # Grow back: the requeued job runs again.
    assert mc("scale", "shrink", "2").returncode == 0
    assert waiter(lambda: job(requeued)["state"] == "RUN", timeout=60)
    flux("cancel", requeued)
    assert mc("down", "shrink").returncode == 0
