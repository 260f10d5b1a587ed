"""The end-to-end suite runs against a real Kubernetes: the one `minicluster kube up` runs on this machine
(`make test` brings it up after the other tests, with KUBECONFIG set), or any cluster KUBECONFIG names.

Without a cluster the suite is skipped with the way to get one; under CI (CI=1) that is a failure instead (the
`kubeconfig` and `crd_installed` fixtures, shared with tests/kubernetes, are in tests/conftest.py).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

E2E_NAMESPACE = os.environ.get("MINICLUSTERS_E2E_NAMESPACE", "default")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test here runs on a real cluster: marked `real_kube` (before `-m` selects), so that `make test` runs
    them with the `real_kube` tests of tests/kubernetes in one invocation and its other parts leave them out."""
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(pytest.mark.real_kube)


@pytest.fixture(scope="module")
def e2e_namespace(kubeconfig: Path, crd_installed: None) -> Iterator[str]:
    """A namespace of its own per test module, deleted (with everything in it) afterwards."""
    import uuid

    from kubernetes import client, config

    name = f"e2e-{uuid.uuid4().hex[:6]}"
    core = client.CoreV1Api(config.new_client_from_config(config_file=str(kubeconfig)))
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    try:
        yield name
    finally:
        core.delete_namespace(name, propagation_policy="Foreground")


@pytest.fixture(scope="module")
def backend(e2e_namespace: str):
    from miniclusters.backends import get_backend

    return get_backend("kubernetes", namespace=e2e_namespace)
