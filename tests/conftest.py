"""Shared fixtures: paths to the repository's examples and a helper to build spec mappings."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("miniclusters", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("miniclusters")
"""Property tests check what holds, never how fast: hypothesis's deadline and its too-slow health check failed
tests under a loaded machine (CI beside Kubernetes, load 100+) with nothing wrong in the code."""

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))

MACHINE_GROUPS = {
    "local": "local-clusters",  # netns mc-<name>-<i>, cgroups miniclusters/<name>: two tests' "hello" would clash
    "bursting": "local-clusters",
    "podman": "containers",  # pods <name>-<i>, the images' build cache
    "images": "containers",
}
"""Test folders whose tests make named things on this machine: under `make test`'s workers each group runs on one
worker, one test at a time, as in a plain run; every other test spreads over the workers on its own."""


def machine_group(nodeid: str) -> str | None:
    """The group of a test id relative to the repository (`tests/local/test_x.py::test_y` -> local-clusters)."""
    parts = nodeid.split("::", 1)[0].split("/")
    return MACHINE_GROUPS.get(parts[1]) if len(parts) > 2 and parts[0] == "tests" else None


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadgroup` by MACHINE_GROUPS. pytest-xdist's own loadgroup reads `xdist_group` marks into the test
    ids, which pytest 9 no longer lets a plugin rewrite; scheduling by scope does the same without that. The biggest
    group is handed out first (pytest-xdist orders scopes by size), so the longest part starts at once."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class MachineGroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return machine_group(nodeid) or nodeid

    return MachineGroupScheduling(config, log)


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


def no_cluster(reason: str) -> None:
    """Skip a test that needs a real Kubernetes, saying how to get one; under CI (CI=1) fail instead: `make test`
    runs these (tests/e2e and the `real_kube` tests of tests/kubernetes) on the cluster it brings up."""
    import os

    if os.environ.get("CI"):
        pytest.fail(f"CI runs the real_kube tests on a real cluster: {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def kubeconfig() -> Iterator[Path]:
    """A real cluster's kubeconfig: KUBECONFIG's, else that of the cluster `minicluster kube up` runs on this
    machine (then also exported as KUBECONFIG for the code under test and its CLI while the session lasts)."""
    import os

    named = os.environ.get("KUBECONFIG")
    if named:
        yield Path(named)
        return
    try:
        from miniclusters.localkube.cluster import is_up
        from miniclusters.localkube.layout import Layout
    except ImportError:
        no_cluster("KUBECONFIG is not set and miniclusters[kube] is not installed")
        raise
    layout = Layout()
    if not layout.stamp.is_file():
        no_cluster("no Kubernetes here: run `make kube` and `minicluster kube up` (or set KUBECONFIG)")
    if not is_up(layout):
        no_cluster(f"the cluster of `make kube` is not up: run `minicluster kube up` (state: {layout.state})")
    os.environ["KUBECONFIG"] = str(layout.kubeconfig)
    try:
        yield layout.kubeconfig
    finally:
        os.environ.pop("KUBECONFIG", None)


@pytest.fixture(scope="session")
def crd_installed(kubeconfig: Path) -> None:
    """Our CRD, server-side applied as `minicluster crd | kubectl apply --server-side -f -` does."""
    from miniclusters.backends.base import UnreachableError
    from miniclusters.testing.kube_e2e import apply_crd

    try:
        apply_crd()
    except UnreachableError as exc:
        no_cluster(f"no Kubernetes answers at KUBECONFIG={kubeconfig}: {exc}")
        raise


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


ROOT_TOOL_CACHES = frozenset({".pytest_cache", ".hypothesis", ".mypy_cache", ".ruff_cache", ".import_linter_cache"})
"""What a test run may add to the repository's root: the caches of pytest, hypothesis and the linters (ignored by
git, rebuilt at will). Anything else a test writes belongs in its tmp_path."""


def _root_listing() -> set[str]:
    return {path.name for path in ROOT.iterdir()} - ROOT_TOOL_CACHES


_ROOT_AT_START = _root_listing()
_FIRST_SEEN: dict[str, str] = {}
"""A new name in the root -> the test after which this process first saw it (the likely producer; under
pytest-xdist it may be another worker's test that ran meanwhile)."""


@pytest.fixture(autouse=True)
def _root_watched(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    for name in _root_listing() - _ROOT_AT_START:
        _FIRST_SEEN.setdefault(name, request.node.nodeid)


@pytest.fixture(scope="session", autouse=True)
def nothing_left_in_the_repository_root() -> Iterator[None]:
    """A test run leaves the checkout's root as it found it: `flux batch` writes flux-<id>.out into its working
    directory and the bench scripts their figures into theirs, so a test that runs either with the root as working
    directory left files there. Under pytest-xdist each worker compares the root over its own tests: a file made
    while any worker runs is new to the worker that made it."""
    before = _root_listing()
    yield
    left = sorted(_root_listing() - before)
    seen = {name: _FIRST_SEEN.get(name, "after the last test") for name in left}
    assert not left, f"the test run left files in the repository root (write them under tmp_path): {seen}"
