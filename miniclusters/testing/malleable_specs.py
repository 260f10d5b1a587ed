"""A short malleable run for the tests of every backend: 4 or 5 jobs of SDSC, seconds long, on 4 nodes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

APP_IMAGE = "ghcr.io/miniclusters/openmpi-openfoam:0.1.0"


# open: a MiniCluster manifest as a user writes it
def short_run(name: str, workdir: Path, policy: str = "min", jobs: int = 4, image: str = APP_IMAGE) -> dict[str, Any]:
    """A MiniCluster whose spec.malleable runs `jobs` jobs of a few seconds each (about half a minute in all)."""
    malleable = {
        "trace": "sdsc", "jobs": jobs, "policy": policy, "arrivals": 6.0, "medianRuntime": 8.0, "runtimeMin": 4.0,
        "runtimeMax": 14.0, "iterations": 100, "resizeTimeout": 20.0, "workdir": str(workdir),
    }  # fmt: skip
    return {
        "apiVersion": "miniclusters.dev/v1alpha1",
        "kind": "MiniCluster",
        "metadata": {"name": name},
        "spec": {"size": 4, "containers": [{"image": image}], "malleable": malleable},
    }
