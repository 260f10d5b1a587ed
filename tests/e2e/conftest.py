"""The end-to-end suite runs against a real Kubernetes: the one `minicluster kube up` runs on this machine
(`make test` brings it up after the other tests, with KUBECONFIG set), or any cluster KUBECONFIG names.

Without a cluster the suite is skipped with the way to get one; under CI (CI=1) that is a failure instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

E2E_NAMESPACE = os.environ.get("MINICLUSTERS_E2E_NAMESPACE", "default")


def _no_cluster(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"CI runs tests/e2e on a real cluster: {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def kubeconfig() -> Iterator[Path]:
    """The real cluster's kubeconfig, also exported as KUBECONFIG for the code under test and its CLI."""
    named = os.environ.get("KUBECONFIG")
    if named:
        yield Path(named)
        return
    try:
        from miniclusters.localkube.cluster import is_up
        from miniclusters.localkube.layout import Layout
    except ImportError:
        _no_cluster("KUBECONFIG is not set and miniclusters[kube] is not installed")
        raise
    layout = Layout()
    if not layout.stamp.is_file():
        _no_cluster("no Kubernetes here: run `make kube` and `minicluster kube up` (or set KUBECONFIG)")
    if not is_up(layout):
        _no_cluster(f"the cluster of `make kube` is not up: run `minicluster kube up` (state: {layout.state})")
    os.environ["KUBECONFIG"] = str(layout.kubeconfig)
    try:
        yield layout.kubeconfig
    finally:
        os.environ.pop("KUBECONFIG", None)


@pytest.fixture(scope="session")
def crd_installed(kubeconfig: Path) -> None:
    """Our CRD, server-side applied as `minicluster crd | kubectl apply --server-side -f -` does."""
    from miniclusters.api.crd import build_crd
    from miniclusters.backends.kubernetes.api import CRD
    from miniclusters.backends.kubernetes.client import RealKubeApi

    api = RealKubeApi.from_kubeconfig(None, "default")
    api.apply(build_crd(), field_manager="miniclusters-e2e", force=True)
    assert api.get(CRD, None, "miniclusters.miniclusters.dev")


@pytest.fixture(scope="module")
def e2e_namespace(kubeconfig: Path, crd_installed: None) -> Iterator[str]:
    """A namespace of its own per test module, deleted (with everything in it) afterwards."""
    import uuid

    from kubernetes import client, config

    name = f"e2e-{uuid.uuid4().hex[:6]}"
    core = client.CoreV1Api(config.new_client_from_config(config_file=str(kubeconfig)))
    core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    try:
        yield name
    finally:
        core.delete_namespace(name, propagation_policy="Foreground")


@pytest.fixture(scope="module")
def backend(e2e_namespace: str):  # type: ignore[no-untyped-def]
    from miniclusters.backends import get_backend

    return get_backend("kubernetes", namespace=e2e_namespace)
