"""The backend's API calls against a real cluster: create, exec, scale, resize (in place and refused), delete."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from miniclusters.api import load_minicluster
from miniclusters.backends.base import CreateOptions, ResizeOutcome
from miniclusters.backends.kubernetes.backend import KubernetesBackend

APP_IMAGE = os.environ.get("MINICLUSTERS_E2E_IMAGE", "ghcr.io/miniclusters/openmpi-openfoam:0.1.0")


def test_create_scale_resize_delete(kubeconfig: Path, e2e_namespace: str, backend: KubernetesBackend) -> None:
    name = f"e2e-{uuid.uuid4().hex[:6]}"
    mc = load_minicluster(
        {
            "apiVersion": "miniclusters.dev/v1alpha1",
            "kind": "MiniCluster",
            "metadata": {"name": name, "namespace": e2e_namespace},
            "spec": {
                "size": 2,
                "maxSize": 3,
                "interactive": True,
                "containers": [{"image": APP_IMAGE, "resources": {"requests": {"cpu": "100m"}}}],
            },
        }
    )
    created = False
    try:
        status = backend.create(mc, CreateOptions(timeout=600))
        created = True
        assert status.running_pods == 2 and status.ranks_up == (0, 1)
        assert backend.exec(name, 1, ["hostname"]).stdout.strip() == f"{name}-1"
        status = backend.scale(name, 3)
        assert status.size == 3
        result = backend.resize(name, 1, "150m")
        assert result.outcome in (ResizeOutcome.DONE, ResizeOutcome.IN_PROGRESS, ResizeOutcome.ACCEPTED)
        # more than the node holds: the real apiserver's PodResize admission refuses it (403, NodeCapacity)
        refused = backend.resize(name, 1, "100000")
        assert refused.outcome is ResizeOutcome.INFEASIBLE
        assert "allocatable" in refused.message
    finally:
        if created:
            backend.delete(name)
