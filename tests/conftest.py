"""Shared fixtures: paths to the repository's examples and a helper to build spec mappings."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))

MACHINE_GROUPS = {
    "local": "local-clusters",  # netns mc-<name>-<i>, cgroups miniclusters/<name>: two tests' "hello" would clash
    "bursting": "local-clusters",
    "podman": "containers",  # pods <name>-<i>, the images' build cache
    "images": "containers",
}
"""Test folders whose tests make named things on this machine: under `make test`'s workers (pytest-xdist
--dist loadgroup) each group runs on one worker, one test at a time, as before; everything else spreads."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    tests = ROOT / "tests"
    for item in items:
        path = Path(item.path)
        if not path.is_relative_to(tests):
            continue
        group = MACHINE_GROUPS.get(path.relative_to(tests).parts[0])
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))


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


def _stray_traces(places: set[Path]) -> set[Path]:
    """PMPI trace files (pmpi.<job>.<rank>.bin) and per-job trace directories (pmpi-<job>) in these directories."""
    return {path for place in places for pattern in ("pmpi.*.bin", "pmpi-*") for path in place.glob(pattern)}


@pytest.fixture(scope="session", autouse=True)
def traces_stay_in_temporary_directories() -> Iterator[None]:
    """The PMPI library writes a trace into its working directory unless told where: every test must run its MPI
    programs (and jobs) with a temporary working or trace directory, never the checkout (issue 24)."""
    places = {ROOT, Path.cwd()}
    before = _stray_traces(places)
    yield
    stray = sorted(str(p) for p in _stray_traces(places) - before)
    assert not stray, f"tests wrote PMPI traces outside a temporary directory: {stray}"
