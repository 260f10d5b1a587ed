"""spec.malleable on this machine: `minicluster up` runs a window of a real trace as real MPI Jacobi jobs in the
MiniCluster, the malleable policy shrinks and expands them by checkpoint and restart, every job ends with its
rigid run's answer, and the report, event log and timeline are written."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from elasticity.control.events import read_events
from miniclusters.testing.malleable_specs import short_run

pytestmark = pytest.mark.needs_root


def _spec(directory: Path, policy: str, **malleable: Any) -> Path:
    data = short_run("mall", directory / "work", policy, jobs=5, image="local")
    data["spec"]["malleable"].update(malleable)
    path = directory / "mall.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_up_runs_the_trace_live_resizing_jobs_with_their_rigid_answers(mc: Callable[..., Any], tmp_path: Path) -> None:
    result = mc("up", str(_spec(tmp_path, "min")), timeout=240)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = result.stdout
    assert "malleable run: 5/5 jobs done" in out and "answers equal to the rigid runs" in out
    assert out.count("= rigid") == 5
    work = tmp_path / "work" / "min"
    events = [e for e in read_events(work / "events.jsonl") if e.get("kind") == "malleable"]
    restarts = [e for e in events if str(e["what"]).startswith("restarted from its checkpoint")]
    asked = [e for e in events if str(e["what"]).startswith("asked to ")]
    assert restarts and asked
    for ask in asked:  # each request ends in a restart on the new size, or the job ended first
        after = next(e for e in events if e["job"] == ask["job"] and e["t"] > ask["t"])
        assert str(after["what"]).startswith(("restarted from its checkpoint", "done on")), (ask, after)
    resized = restarts[0]["job"]
    submissions = (work / resized / "commands.txt").read_text().splitlines()
    assert len(submissions) >= 2, "a resized job is submitted again (from its checkpoint)"
    assert len({s.split(" -N ")[1].split()[0] for s in submissions}) >= 2, "on another node count"
    assert (work / "timeline.png").stat().st_size > 10_000
    assert "simulated min" in out and "live min" in out


def test_a_contract_refused_at_submit_names_the_attribute(mc: Callable[..., Any], tmp_path: Path) -> None:
    spec = _spec(tmp_path, "min")
    spec_data = yaml.safe_load(spec.read_text())
    spec_data["spec"]["malleable"]["runtimeMin"] = 30.0
    spec.write_text(yaml.safe_dump(spec_data))
    result = mc("up", str(spec))
    assert result.returncode == 2 and "spec.malleable.runtimeMin: must not be above runtimeMax" in result.stderr


def test_a_work_directory_holding_someone_elses_files_is_refused_untouched(
    mc: Callable[..., Any], tmp_path: Path
) -> None:
    spec = _spec(tmp_path, "min")
    theirs = tmp_path / "work"
    (theirs / "min").mkdir(parents=True)
    (theirs / "min" / "thesis.tex").write_text("years of work")
    result = mc("up", str(spec))
    assert result.returncode == 2, result.stdout + result.stderr
    assert "spec.malleable.workdir" in result.stderr and "is not empty" in result.stderr
    assert (theirs / "min" / "thesis.tex").read_text() == "years of work"
    assert "MiniCluster mall up" not in result.stdout, "nothing started"
