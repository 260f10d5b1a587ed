"""spec.malleable on real containers: `minicluster up --backend podman` runs a short window of a real trace as the
image's malleable Jacobi solver in the pods, resizes jobs by checkpoint and restart through the work directory
every pod mounts, and every job ends with its rigid run's answer. Without podman or the images these skip; under
CI they fail."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import yaml

from elasticity.control.events import read_events
from miniclusters.testing.malleable_specs import short_run

MINICLUSTER = str(Path(sys.executable).parent / "minicluster")


def test_a_short_trace_runs_live_in_containers_with_rigid_answers(images: None, tmp_path: Path) -> None:
    name = f"pmt-mall-{uuid.uuid4().hex[:6]}"
    work = tmp_path / "work"
    data = short_run(name, work)
    spec = tmp_path / "mall.yaml"
    spec.write_text(yaml.safe_dump(data))
    env = {**os.environ, "MINICLUSTERS_STATE_DIR": str(tmp_path / "state")}
    up = subprocess.run(
        [MINICLUSTER, "up", str(spec), "--backend", "podman"], capture_output=True, text=True, timeout=600, env=env
    )
    assert up.returncode == 0, up.stdout[-4000:] + up.stderr[-2000:]
    assert "malleable run: 4/4 jobs done" in up.stdout and "answers equal to the rigid runs" in up.stdout
    events = [e for e in read_events(work / "min" / "events.jsonl") if e.get("kind") == "malleable"]
    assert any(str(e["what"]).startswith("restarted from its checkpoint") for e in events), up.stdout[-3000:]
    assert "/usr/local/bin/malleable_jacobi" in next((work / "min").glob("j*/commands.txt")).read_text()
    assert f"MiniCluster {name} down" in up.stdout
