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
