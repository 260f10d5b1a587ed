"""Fixtures: an in-memory API server, a backend and an operator on it, and a fake clock (no real waiting); and
`kube`, the same test against the fake and against a real cluster (marked `real_kube`, a namespace of its own)."""

from __future__ import annotations

import copy
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from miniclusters.api import load_minicluster
from miniclusters.api.spec import MiniCluster
from miniclusters.backends.kubernetes.backend import KubernetesBackend
from miniclusters.operator.controller import Controller
from miniclusters.testing.fake_kube import FakeKube
from miniclusters.testing.kube_sides import KubeSide


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def wall(self) -> datetime:
        return datetime(2025, 1, 1, tzinfo=UTC) + timedelta(seconds=self.now)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def fake() -> FakeKube:
    return FakeKube(namespace="hpc")


@pytest.fixture
def backend(fake: FakeKube, clock: FakeClock) -> KubernetesBackend:
    return KubernetesBackend(api=fake, clock=clock, sleep=clock.sleep, poll_interval=1.0, resize_wait=5.0)


@pytest.fixture
def controller(fake: FakeKube, clock: FakeClock) -> Controller:
    return Controller(fake, namespace="hpc", clock=clock, wall=clock.wall)


SPEC: dict[str, Any] = {
    "apiVersion": "miniclusters.dev/v1alpha1",
    "kind": "MiniCluster",
    "metadata": {"name": "demo", "namespace": "hpc"},
    "spec": {
        "size": 2,
        "minSize": 1,
        "maxSize": 6,
        "interactive": True,
        "containers": [{"image": "app:1", "resources": {"requests": {"cpu": "1"}}}],
    },
}


@pytest.fixture
def spec_data() -> dict[str, Any]:
    return copy.deepcopy(SPEC)


@pytest.fixture
def make_mc() -> Callable[..., MiniCluster]:
    def make(**spec: Any) -> MiniCluster:
        data = copy.deepcopy(SPEC)
        data["spec"].update(spec)
        return load_minicluster(data)

    return make


@pytest.fixture(params=["fake", pytest.param("real", marks=pytest.mark.real_kube)])
def kube(request: pytest.FixtureRequest) -> Iterator[KubeSide]:
    """The test against the fake API server, then against a real one (KUBECONFIG, or the cluster of `minicluster
    kube up`; skipped without one, a failure under CI=1) in a fresh namespace deleted with all in it afterwards."""
    if request.param == "fake":
        yield KubeSide("fake", FakeKube(namespace="hpc"), "hpc")
        return
    from miniclusters.backends.kubernetes.api import NAMESPACE
    from miniclusters.backends.kubernetes.client import RealKubeApi

    request.getfixturevalue("crd_installed")
    name = f"kt-{uuid.uuid4().hex[:8]}"
    api = RealKubeApi.from_kubeconfig(None, name)
    api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    try:
        yield KubeSide("real", api, name)
    finally:
        api.delete(NAMESPACE, None, name)
