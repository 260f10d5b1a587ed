"""End-to-end on a real cluster (kind or k3s, Kubernetes >= 1.33). Skipped unless KUBECONFIG is set.

Needs our images where the cluster can pull them: set MINICLUSTERS_REGISTRY / MINICLUSTERS_TAG (or load them
into kind with `kind load docker-image`). See docs/development.md, "End-to-end tests".
"""

from __future__ import annotations

import os
import uuid

import pytest

from miniclusters.api import load_minicluster
from miniclusters.backends import get_backend
from miniclusters.backends.base import CreateOptions, ResizeOutcome
from miniclusters.backends.kubernetes.api import CRD
from miniclusters.backends.kubernetes.backend import KubernetesBackend
from miniclusters.backends.kubernetes.client import RealKubeApi

pytestmark = pytest.mark.skipif(not os.environ.get("KUBECONFIG"), reason="KUBECONFIG not set: no cluster")
NAMESPACE = os.environ.get("MINICLUSTERS_E2E_NAMESPACE", "default")
APP_IMAGE = os.environ.get("MINICLUSTERS_E2E_IMAGE", "ghcr.io/miniclusters/openmpi-openfoam:0.1.0")


@pytest.fixture(scope="module")
def backend() -> KubernetesBackend:
    from miniclusters.api.crd import build_crd

    api = RealKubeApi.from_kubeconfig(None, NAMESPACE)
    api.apply(build_crd(), field_manager="miniclusters-e2e", force=True)
    assert api.get(CRD, None, "miniclusters.miniclusters.dev")
    target = get_backend("kubernetes", namespace=NAMESPACE)
    assert isinstance(target, KubernetesBackend)
    return target


def test_create_scale_resize_delete(backend: KubernetesBackend) -> None:
    name = f"e2e-{uuid.uuid4().hex[:6]}"
    mc = load_minicluster(
        {
            "apiVersion": "miniclusters.dev/v1alpha1",
            "kind": "MiniCluster",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {
                "size": 2,
                "maxSize": 3,
                "interactive": True,
                "containers": [{"image": APP_IMAGE, "resources": {"requests": {"cpu": "100m"}}}],
            },
        }
    )
    try:
        status = backend.create(mc, CreateOptions(timeout=600))
        assert status.running_pods == 2 and status.ranks_up == (0, 1)
        assert backend.exec(name, 1, ["hostname"]).stdout.strip() == f"{name}-1"
        status = backend.scale(name, 3)
        assert status.size == 3
        result = backend.resize(name, 1, "150m")
        assert result.outcome in (ResizeOutcome.DONE, ResizeOutcome.IN_PROGRESS, ResizeOutcome.ACCEPTED)
        assert backend.resize(name, 1, "100000").outcome is ResizeOutcome.INFEASIBLE
    finally:
        backend.delete(name)
