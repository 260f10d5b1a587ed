"""The operator inside the real cluster, as Flux Operator users run theirs: `minicluster operator install`, then
`kubectl apply -f examples/hello.yaml`; everything else happens in the cluster. The API server itself refuses a
MiniCluster the CRD's rules refuse, naming the field. `uninstall` leaves no object of ours."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from miniclusters.testing.kube_e2e import ROOT, apply_crd, cli, kubectl, kubectl_json, objects_of, wait_until

OPERATOR_NS = "miniclusters-system"


@pytest.fixture
def namespace(kubeconfig: Path, crd_installed: None) -> Iterator[str]:
    """A namespace of the test's own; afterwards the operator is uninstalled (whatever happened) and the CRD the
    rest of the suite uses is applied again."""
    name = f"e2e-inst-{uuid.uuid4().hex[:4]}"
    assert kubectl(kubeconfig, "create", "namespace", name).returncode == 0
    try:
        yield name
    finally:
        kubectl(kubeconfig, "delete", "namespace", name, "--wait=false")
        cli("operator", "uninstall", "--delete-miniclusters", timeout=300)
        apply_crd()


def _ours(kubeconfig: Path) -> list[str]:
    """Objects the install made that are still there."""
    left = []
    for args in (
        ("get", "crd", "miniclusters.miniclusters.dev"),
        ("get", "namespace", OPERATOR_NS),
        ("get", "clusterrole", "miniclusters-operator"),
        ("get", "clusterrolebinding", "miniclusters-operator"),
    ):
        if kubectl(kubeconfig, *args).returncode == 0:
            left.append(" ".join(args[1:]))
    return left


def _ready(kubeconfig: Path, namespace: str, name: str) -> dict[str, Any] | None:
    obj = kubectl_json(kubeconfig, "get", f"miniclusters/{name}", "-n", namespace)
    return next((c for c in (obj.get("status") or {}).get("conditions", []) if c["type"] == "Ready"), None)


def test_install_apply_hello_refuse_a_bad_spec_and_uninstall(kubeconfig: Path, namespace: str) -> None:
    installed = cli("operator", "install", timeout=400)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert "operator available: 2/2 available" in installed.stderr
    status = cli("operator", "status")
    assert status.returncode == 0 and "Ready, 0 restarts" in status.stdout, status.stdout + status.stderr

    # a MiniCluster applied with kubectl becomes pods that run MPI; the operator says it completed
    applied = kubectl(kubeconfig, "apply", "-n", namespace, "-f", str(ROOT / "examples" / "hello.yaml"))
    assert applied.returncode == 0, applied.stderr
    condition = wait_until(
        "the operator marks hello Completed",
        lambda: (c := _ready(kubeconfig, namespace, "hello")) and c["reason"] in ("Completed", "Failed") and c,
        timeout=300,
        interval=2,
    )
    assert condition["reason"] == "Completed", condition
    logs = cli("logs", "hello", "0", "--backend", "kubernetes", "--namespace", namespace)
    ranks = sorted(line for line in logs.stdout.splitlines() if line.startswith("hello from rank"))
    assert [line.split(" on ")[0] for line in ranks] == [f"hello from rank {i} of 4" for i in range(4)], logs.stdout
    header, row = kubectl(kubeconfig, "get", "miniclusters", "-n", namespace).stdout.splitlines()[:2]
    assert header.split()[:4] == ["NAME", "SIZE", "READY", "PHASE"] and header.split()[-1] == "AGE", header
    assert row.split()[:2] == ["hello", "4"] and row.split()[3] == "Completed", row

    # the API server refuses what the CRD's rules refuse, naming the field, and stores nothing
    bad = yaml.safe_load((ROOT / "examples" / "hello.yaml").read_text())
    bad["metadata"]["name"] = "too-small"
    bad["spec"].update(size=3, maxSize=2)
    refused = kubectl(kubeconfig, "apply", "-n", namespace, "-f", "-", stdin=yaml.safe_dump(bad))
    assert refused.returncode != 0
    assert "spec.maxSize: Invalid value: maxSize (2) must not be smaller than size (3)" in refused.stderr
    assert kubectl(kubeconfig, "get", "minicluster", "too-small", "-n", namespace).returncode != 0

    # deleting the MiniCluster removes everything it owns; uninstall removes everything install made
    deleted = kubectl(kubeconfig, "delete", "minicluster", "hello", "-n", namespace, "--cascade=foreground")
    assert deleted.returncode == 0, deleted.stderr
    wait_until("no object of hello left", lambda: not objects_of(kubeconfig, namespace, "hello"), timeout=120)
    removed = cli("operator", "uninstall", timeout=300)
    assert removed.returncode == 0, removed.stdout + removed.stderr
    assert _ours(kubeconfig) == []
    assert cli("operator", "status").returncode == 1
