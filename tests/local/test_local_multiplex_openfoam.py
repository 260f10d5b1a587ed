"""`minicluster multiplex` packing two real rhoSimpleFoam NACA0012 cases on two pods (bench_multiplex --app openfoam,
at a few iterations): both finish with Cl/Cd, each in its own copy of the case, profiled by MPI_Allreduce windows,
the pods resized in place and never restarted. Small on purpose (4 iterations) so CI can afford it; the bench is
the full-size run."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from broker.testing import require_tool
from elasticity.control.events import read_events
from elasticity.workloads.foam_jobs import JOB_CASE, job_command_line, prepare_job_case
from elasticity.workloads.naca_sweep import final_coefficients
from elasticity.workloads.openfoam import BOUNDARY_CALL, solver_iterations

pytestmark = pytest.mark.needs_root

ITERATIONS = 4


def _spec(directory: Path, name: str) -> Path:
    data = {
        "apiVersion": "miniclusters.dev/v1alpha1",
        "kind": "MiniCluster",
        "metadata": {"name": name},
        "spec": {
            "size": 2,
            "tasks": 4,
            "interactive": True,
            "containers": [{"image": "local", "resources": {"requests": {"cpu": "1"}}}],
        },
    }
    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_two_openfoam_cases_are_packed_resized_in_place_and_both_report_cl_cd(
    mc: Callable[..., subprocess.CompletedProcess[str]], machine: Any, tmp_path: Path
) -> None:
    require_tool("rhoSimpleFoam", "openfoam openfoam-examples")
    case = prepare_job_case(tmp_path / "naca", ITERATIONS)
    assert "residualControl" not in (case.path / "system" / "fvSolution").read_text()  # every run does them all
    assert mc("up", str(_spec(tmp_path, "muxfoam")), "--detach").returncode == 0
    timeline = tmp_path / "foam.png"
    work = tmp_path / "work"
    result = mc(
        "multiplex", "muxfoam", "--command", job_command_line(case), "--max", "2", "--total", "2",
        "--profile-together", "2", "--boundary", BOUNDARY_CALL, "--profile-iterations", "300", "--json",
        "--timeline", str(timeline), "--workdir", str(work), "--settle", "1", "--interval", "0.5",
        "--timeout", "240", timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert [s["state"] for s in summary["simulations"]] == ["done", "done"], summary
    assert summary["restarts"] == 0 and summary["same_pids"] is True
    # each simulation ran the whole bounded case in its own copy, and its forces were written
    for sim in ("sim1", "sim2"):
        copy = work / sim / JOB_CASE
        assert (copy / "processor3").is_dir(), sorted(p.name for p in (work / sim).iterdir())
        output = work / sim / "output.txt"
        assert solver_iterations(output) == ITERATIONS and "\nEnd\n" in output.read_text()
        last = final_coefficients(copy)
        assert last.iteration == ITERATIONS and last.cd != 0.0, last
    assert not list(work.glob("sim*/.case.*")), "the ranks that lost the race to copy the case removed their copy"
    assert not (case.path / "postProcessing" / "forceCoeffs").exists(), "the prepared case itself is never run"
    events = list(read_events(timeline.with_suffix(".jsonl")))
    kinds = [e["kind"] for e in events]
    assert kinds.count("profiled") == 2 and kinds.count("done") == 2, kinds
    # both profiled from their MPI_Allreduce windows: every rank measured, none at full duty
    assert all(s["mean_duty"] is not None and 0 < s["mean_duty"] < 1 for s in summary["simulations"]), summary
    # the controller resized the pods from those profiles, every resize answered in place
    answers = [e for e in events if e["kind"] == "resize-answer"]
    assert summary["resizes"] >= 1 and answers and all(e["answer"] == "done" for e in answers), answers
