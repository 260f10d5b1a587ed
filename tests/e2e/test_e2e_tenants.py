"""docs/tenants.md's Kubernetes block, run as written on the real cluster: the operator bound in two tenant
namespaces only, a tenant's MiniCluster applied as that tenant (`kubectl --as alice`) and brought up by the
operator there, and the real API server's RBAC holding what the fake one enforces (miniclusters/testing/
fake_rbac.py): alice may not look into team-b, nor read Secrets in her own namespace. Uninstall takes the
tenants' RBAC with it and leaves their namespaces."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from miniclusters.testing.kube_e2e import (
    apply_crd,
    cli,
    doc_block,
    kubectl,
    kubectl_json,
    run_as_written,
    wait_until,
)
from tests.e2e.taken import names_taken

TENANTS = ("alice", "team-b")  # the block's own names: it is run as written
OPERATOR_NAMESPACE = "miniclusters-system"


@pytest.fixture
def tenant_names(kubeconfig: Path, crd_installed: None) -> Iterator[None]:
    """The block installs the operator and makes the tenants' namespaces: a cluster that has any of them is not
    this suite's to change. Afterwards the operator and the tenants go, and the suite's CRD comes back."""
    taken = [ns for ns in (*TENANTS, OPERATOR_NAMESPACE) if kubectl(kubeconfig, "get", "namespace", ns).returncode == 0]
    if taken:
        names_taken(f"namespace(s) {', '.join(taken)} already in this cluster; the tenants block makes them")
    try:
        yield
    finally:
        cli("operator", "uninstall", "--delete-miniclusters", timeout=300)
        kubectl(kubeconfig, "delete", "namespace", *TENANTS, "--ignore-not-found", "--wait=true", "--timeout=120s")
        apply_crd()


def _ready(kubeconfig: Path) -> dict[str, Any] | None:
    obj = kubectl_json(kubeconfig, "get", "miniclusters/tenants", "-n", "alice")
    conditions = (obj.get("status") or {}).get("conditions", [])
    return next((c for c in conditions if c["type"] == "Ready" and c["status"] == "True"), None)


def test_the_tenants_block_runs_as_written_and_the_real_rbac_holds(kubeconfig: Path, tenant_names: None) -> None:
    ran = run_as_written(doc_block("docs/tenants.md", __file__))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "alice may not look into team-b" in ran.stdout  # the real API server refused her
    assert "namespace: team-b" in ran.stdout  # the same spec rendered for another tenant

    # the operator, bound in the tenants' namespaces only, brings alice's MiniCluster up there
    wait_until("the operator makes alice's MiniCluster Ready", lambda: _ready(kubeconfig), timeout=300, interval=2)
    as_alice = ("--as", "alice", "-n", "alice")
    assert kubectl(kubeconfig, *as_alice, "get", "pods").returncode == 0
    assert kubectl(kubeconfig, *as_alice, "logs", "job/tenants").returncode == 0
    secrets = kubectl(kubeconfig, *as_alice, "get", "secrets")
    assert secrets.returncode != 0 and "forbidden" in secrets.stderr.lower(), secrets.stderr
    bob = kubectl(kubeconfig, "--as", "bob", "-n", "alice", "get", "miniclusters")
    assert bob.returncode != 0 and "forbidden" in bob.stderr.lower(), bob.stderr

    # uninstall takes the tenants' RBAC along and leaves their namespaces
    gone = cli("operator", "uninstall", "--delete-miniclusters", timeout=300)
    assert gone.returncode == 0, gone.stdout + gone.stderr
    assert kubectl(kubeconfig, "get", "clusterrole", "miniclusters-tenant").returncode != 0
    assert (
        kubectl_json(kubeconfig, "get", "rolebindings", "-n", "alice", "-l", "miniclusters.dev/tenant")["items"] == []
    )
    assert all(kubectl(kubeconfig, "get", "namespace", ns).returncode == 0 for ns in TENANTS)
