"""The README's Kubernetes block, run as written on the real cluster with the kubectl `make kube` built: plain
rendered objects applied with kubectl run MPI across four pods without the operator, the CRD applies server-side,
and `up` in the namespace the block creates prints commands that reach the cluster as printed. A namespace that
does not exist is refused with the command that creates it, as the real API server words its refusal."""

from __future__ import annotations

import shlex
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from miniclusters.testing.kube_e2e import (
    ROOT,
    cli,
    containers_of,
    doc_block,
    kubectl,
    kubectl_json,
    run_as_written,
    user_env,
    wait_until,
)
from tests.e2e.taken import names_taken

NAMESPACE = "hpc"  # the block's own names: it is run as written
HELLO_OBJECTS = ("job/hello", "service/hello", "configmap/hello-flux-config", "secret/hello-curve-cert")


@pytest.fixture
def readme_names(kubeconfig: Path, crd_installed: None) -> Iterator[None]:
    """The block makes namespace hpc and hello's objects in the default namespace: a cluster that has any of them
    already is not this suite's to change (the clean-up deletes them). Afterwards everything the block made is
    removed."""
    checks: list[tuple[str, tuple[str, ...]]] = [(f"namespace {NAMESPACE}", ("get", "namespace", NAMESPACE))]
    checks += [(f"{what} in the default namespace", ("get", what)) for what in HELLO_OBJECTS]
    taken = [what for what, args in checks if kubectl(kubeconfig, *args).returncode == 0]
    if taken:
        names_taken(f"{', '.join(taken)} already in this cluster; the README's block makes them")
    try:
        yield
    finally:
        cli("down", "elastic", "--backend", "kubernetes", "-n", NAMESPACE)
        kubectl(kubeconfig, "delete", *HELLO_OBJECTS, "--ignore-not-found", "--wait=true")
        kubectl(kubeconfig, "delete", "namespace", NAMESPACE, "--ignore-not-found", "--wait=true", "--timeout=120s")
        wait_until("no container of hello's pods running", lambda: not containers_of("default"), timeout=120)


def test_the_readmes_kubernetes_block_runs_as_written(kubeconfig: Path, readme_names: None) -> None:
    ran = run_as_written(doc_block("README.md", __file__))
    assert ran.returncode == 0, ran.stdout + ran.stderr

    # the rendered objects alone, without the operator: the Indexed Job runs MPI across its four pods
    def completed() -> bool:
        job = kubectl_json(kubeconfig, "get", "job/hello")
        return any(c["type"] in ("Complete", "Failed") for c in (job.get("status") or {}).get("conditions", []))

    wait_until("the rendered hello Job finishes", completed, timeout=300, interval=2)
    logs = kubectl(kubeconfig, "logs", "job/hello", "-c", "hello").stdout
    ranks = sorted(line.split(" on ")[0] for line in logs.splitlines() if line.startswith("hello from rank"))
    assert ranks == [f"hello from rank {i} of 4" for i in range(4)], logs

    # `up` in the block's namespace: the commands it printed reach the cluster as printed
    printed = [shlex.split(line.split("#")[0]) for line in ran.stdout.splitlines() if line.startswith("  minicluster ")]
    status = next(words for words in printed if words[1] == "status")
    assert status == ["minicluster", "status", "elastic", "--backend", "kubernetes", "-n", NAMESPACE], ran.stdout
    shown = subprocess.run(status, env=user_env(), capture_output=True, text=True, timeout=120, check=False)
    assert shown.returncode == 0 and "Ranks:       0-1 up" in shown.stdout, shown.stdout + shown.stderr


def test_up_into_a_namespace_that_does_not_exist_says_how_to_create_it(kubeconfig: Path, crd_installed: None) -> None:
    missing = f"e2e-none-{uuid.uuid4().hex[:4]}"
    up = cli("up", str(ROOT / "examples" / "elastic.yaml"), "--backend", "kubernetes", "--namespace", missing)
    assert up.returncode == 1, up.stdout + up.stderr
    assert f"namespace '{missing}' does not exist: create it first (kubectl create namespace {missing})" in up.stderr
    assert kubectl(kubeconfig, "get", "namespace", missing).returncode != 0  # nothing made on the way
