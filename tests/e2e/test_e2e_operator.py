"""The operator's loops on the real cluster: `examples/multiplex.yaml` and `examples/naca0012-campaign.yaml` with
`--backend kubernetes`, driven by `minicluster operator` (run here against the real API server, as a user runs it
out of the cluster). Pods are resized through the `resize` subresource with 0 restarts, the campaign's cluster
grows and shrinks through the Indexed Job, and every member ends with Cl/Cd."""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from miniclusters.testing.kube_e2e import MINICLUSTER, ROOT, cli, kubectl_json, objects_of, pod_of, wait_until


@pytest.fixture(scope="module")
def operator_log(kubeconfig: Path, e2e_namespace: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """`minicluster operator -n NS` running for the module; its log (printed when a test fails)."""
    log = tmp_path_factory.mktemp("operator") / "operator.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [*MINICLUSTER, "operator", "--namespace", e2e_namespace],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=os.environ.copy(),
        )
    try:
        yield log
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def _condition(kubeconfig: Path, namespace: str, name: str, kind: str) -> dict[str, Any] | None:
    obj = kubectl_json(kubeconfig, "get", f"miniclusters/{name}", "-n", namespace)
    return next((c for c in (obj.get("status") or {}).get("conditions", []) if c["type"] == kind), None)


def _events(kubeconfig: Path, namespace: str, name: str) -> list[str]:
    listed = kubectl_json(
        kubeconfig, "get", "events", "-n", namespace, "--field-selector", f"involvedObject.name={name}"
    )
    return [f"{e['reason']}: {e.get('message', '')}" for e in listed["items"]]


def _containers(kubeconfig: Path, namespace: str, name: str, size: int) -> dict[int, tuple[str, int]]:
    """Per pod index: (container id, restart count) of the runner container."""
    out = {}
    for index in range(size):
        status = pod_of(kubeconfig, namespace, name, index)["status"]["containerStatuses"][0]
        out[index] = (status["containerID"], status["restartCount"])
    return out


def _log_tail(log: Path) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-40:])


def test_multiplex_example_packs_simulations_resizing_pods_in_place(
    kubeconfig: Path, e2e_namespace: str, operator_log: Path, tmp_path: Path
) -> None:
    name = f"mux-{uuid.uuid4().hex[:4]}"
    spec = yaml.safe_load((ROOT / "examples" / "multiplex.yaml").read_text())
    spec["metadata"]["name"] = name
    path = tmp_path / "multiplex.yaml"
    path.write_text(yaml.safe_dump(spec))
    ns = ["--backend", "kubernetes", "--namespace", e2e_namespace]
    up = cli("up", str(path), *ns)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        before = _containers(kubeconfig, e2e_namespace, name, 2)

        def done() -> dict[str, Any] | None:
            condition = _condition(kubeconfig, e2e_namespace, name, "Multiplexing")
            return condition if condition and condition["reason"] in ("Done", "LoopFailed", "Disabled") else None

        try:
            condition = wait_until("the Multiplexing condition says Done", done, timeout=600, interval=3)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\noperator log:\n{_log_tail(operator_log)}") from None
        events = _events(kubeconfig, e2e_namespace, name)
        assert condition["reason"] == "Done", f"{condition}\n{events}\n{_log_tail(operator_log)}"
        assert "3 finished" in condition["message"], condition
        finished = [e for e in events if e.startswith("SimulationFinished")]
        resized = [e for e in events if e.startswith("Resized")]
        assert len(finished) == 3 and resized, events
        # every resize went through the pod `resize` subresource in place: same containers, 0 restarts
        assert _containers(kubeconfig, e2e_namespace, name, 2) == before
        requests = [
            pod_of(kubeconfig, e2e_namespace, name, i)["status"]["containerStatuses"][0]["resources"]["requests"]["cpu"]
            for i in range(2)
        ]
        assert requests != ["1", "1"], requests  # the controller left the rigid 1 CPU per pod
    finally:
        cli("down", name, *ns)
    wait_until("no object of the cluster left", lambda: not objects_of(kubeconfig, e2e_namespace, name))


def test_naca0012_campaign_completes_every_member_growing_shrinking_and_resizing(
    kubeconfig: Path, e2e_namespace: str, operator_log: Path, tmp_path: Path
) -> None:
    name = f"naca-{uuid.uuid4().hex[:4]}"
    workdir = tmp_path / "campaign"  # the volume the operator (here) and the pods share: a hostPath on one node
    spec = yaml.safe_load((ROOT / "examples" / "naca0012-campaign.yaml").read_text())
    spec["metadata"]["name"] = name
    spec["spec"]["campaign"]["workdir"] = str(workdir)
    spec["spec"]["containers"][0]["volumes"] = {"campaign": {"hostPath": str(workdir), "path": str(workdir)}}
    path = tmp_path / "campaign.yaml"
    path.write_text(yaml.safe_dump(spec))
    ns = ["--backend", "kubernetes", "--namespace", e2e_namespace]
    up = cli("up", str(path), *ns, timeout=1200)
    output = up.stdout + up.stderr
    assert up.returncode == 0, f"{output}\noperator log:\n{_log_tail(operator_log)}"
    assert "campaign Done: 6/6 members completed" in output, output
    members = ("alpha-", "mach-")  # the Cl/Cd table's rows (the operations table has one row per ensemble)
    rows = [row for row in (line.split() for line in up.stdout.splitlines()) if row[1:2] and row[1].startswith(members)]
    assert len(rows) == 6 and all(row[4] == "done" for row in rows), up.stdout
    assert all(float(row[5]) == float(row[5]) and float(row[6]) > 0 for row in rows), up.stdout  # Cl, Cd
    events = _events(kubeconfig, e2e_namespace, name)
    summary = next(line for line in output.splitlines() if "6/6 members completed" in line)
    scale_events = int(summary.split(" scale events")[0].rsplit(" ", 1)[1])
    resizes = int(summary.split(" resizes")[0].rsplit(" ", 1)[1])
    assert scale_events >= 2 and resizes >= 1, summary  # grew to 2 pods and shrank back; resized in place
    assert not [e for e in events if e.startswith("PodRestarted")], events
    assert "None" not in next(line for line in output.splitlines() if "CPU-seconds requested" in line), output
    assert "deleted MiniCluster" in output
    wait_until("no object of the cluster left", lambda: not objects_of(kubeconfig, e2e_namespace, name))
