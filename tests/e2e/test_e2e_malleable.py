"""spec.malleable on the real cluster: `minicluster up --backend kubernetes` runs a short window of a real trace as
the image's malleable Jacobi solver in real pods, resizes jobs by checkpoint and restart through the work
directory every pod mounts (a hostPath on this one-node cluster), and every job ends with its rigid run's answer;
`up` removes the MiniCluster's objects when the run ends."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import yaml

from elasticity.control.events import read_events
from miniclusters.testing.kube_e2e import cli, objects_of, wait_until
from miniclusters.testing.malleable_specs import short_run


def test_a_short_trace_runs_live_in_real_pods_with_rigid_answers(
    kubeconfig: Path, e2e_namespace: str, tmp_path: Path
) -> None:
    name = f"mall-{uuid.uuid4().hex[:4]}"
    work = Path("/var/tmp") / f"miniclusters-e2e-{name}"  # a path the node's kubelet can mount (hostPath)
    data = short_run(name, work)
    spec = tmp_path / "mall.yaml"
    spec.write_text(yaml.safe_dump(data))
    try:
        up = cli("up", str(spec), "--backend", "kubernetes", "--namespace", e2e_namespace, timeout=600)
        assert up.returncode == 0, up.stdout[-4000:] + up.stderr[-2000:]
        assert "malleable run: 4/4 jobs done" in up.stdout and "answers equal to the rigid runs" in up.stdout
        events = [e for e in read_events(work / "min" / "events.jsonl") if e.get("kind") == "malleable"]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert any(str(e["what"]).startswith("restarted from its checkpoint") for e in events), up.stdout[-3000:]
    wait_until("no object of the cluster left", lambda: not objects_of(kubeconfig, e2e_namespace, name))
