"""Fixtures: an in-memory API server, a backend and an operator on it, and a fake clock (no real waiting)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from miniclusters.api import load_minicluster
from miniclusters.api.spec import MiniCluster
from miniclusters.backends.kubernetes.backend import KubernetesBackend
from miniclusters.operator.controller import Controller
from miniclusters.testing.fake_kube import FakeKube


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
