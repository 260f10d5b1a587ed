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
