"""A pool of MiniClusters in one namespace with a node budget, resized through the Kubernetes backend (API fake)
by the same elastic policy function the simulator runs."""

from __future__ import annotations

import copy
from typing import Any

from elasticity.control.pool import Member, Pool
from elasticity.model.speedup import JobSize
from elasticity.policy.scheduling import policy_named
from miniclusters.api import load_minicluster
from miniclusters.backends.kubernetes.api import JOB, MINICLUSTER
from miniclusters.backends.kubernetes.backend import KubernetesBackend
from miniclusters.backends.ports import ports_for
from miniclusters.testing.fake_kube import FakeKube


def test_elastic_pool_in_a_namespace(backend: KubernetesBackend, fake: FakeKube, spec_data: dict[str, Any]) -> None:
    class Launcher:
        def launch(self, name: str, size: int) -> None:
            data = copy.deepcopy(spec_data)
            data["metadata"]["name"] = name
            data["spec"].update(size=size, minSize=1, maxSize=8)
            backend.create(load_minicluster(data))

    observer, actuator = ports_for(backend)
    clock = [0.0]
    pool = Pool(8, policy_named("elastic", rescale_gap=0), observer, actuator, Launcher(), clock=lambda: clock[0])
    pool.add(Member("low", JobSize(1, 1, 8), priority=1, submit=0))
    assert pool.step().acted == ["start low at 8"]
    clock[0] = 10.0
    pool.add(Member("high", JobSize(2, 2, 4), priority=5, submit=10))
    # The budget is full: the low-priority cluster gives the high-priority one its minimum.
    assert pool.step().acted == ["scale low 8 -> 6", "start high at 2"]
    assert fake.stored(MINICLUSTER, "low")["spec"]["size"] == 6
    assert fake.stored(JOB, "low")["spec"]["parallelism"] == 6
    assert fake.stored(JOB, "high")["spec"]["parallelism"] == 2
    assert pool.step().acted == []  # stable: nothing idle, nothing waiting
    pool.remove("high")
    backend.delete("high")
    clock[0] = 20.0
    assert pool.step().acted == ["scale low 6 -> 8"]
