"""Shared fixtures: paths to the repository's examples and a helper to build spec mappings."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))


@pytest.fixture
def minimal_spec() -> dict[str, Any]:
    """A valid MiniCluster mapping that tests mutate into invalid ones."""
    return copy.deepcopy(
        {
            "apiVersion": "miniclusters.dev/v1alpha1",
            "kind": "MiniCluster",
            "metadata": {"name": "demo", "namespace": "hpc"},
            "spec": {"size": 2, "containers": [{"image": "app:1", "command": "hostname"}]},
        }
    )


@pytest.fixture(scope="session")
def flux_core() -> Any:
    """Real flux-core (`make flux-core` builds it; `make test` does so first): fails under CI when missing."""
    import os

    from miniclusters.backends.local.flux_view import FluxCoreNotFound, find_flux_core

    try:
        return find_flux_core()
    except FluxCoreNotFound as exc:
        if os.environ.get("CI"):
            pytest.fail(f"{exc} (`make test` runs `make flux-core` before the tests)")
        pytest.skip(str(exc))
