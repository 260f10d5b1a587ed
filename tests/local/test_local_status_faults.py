"""The local backend's status after a killed pod process keeps the rules podman's now keeps (issue 41): a pod is
ready only while it runs and its rank has joined, the cluster is Running only when every pod is, a pod whose
process is gone is counted neither running nor ready, and no pod's RESTARTS ever goes down."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from typing import Any

import pytest

from miniclusters.backends.base import ClusterStatus
from miniclusters.backends.local.backend import LocalBackend
from miniclusters.backends.states import cluster_state
from miniclusters.testing.pod_processes import broker_of
from tests.waiting import wait_until

pytestmark = pytest.mark.needs_root
SIZE = 3


class Looks:
    """Every status taken, each checked against the rules a true status keeps."""

    def __init__(self, backend: LocalBackend, name: str) -> None:
        self.backend, self.name = backend, name
        self.restarts: dict[int, int] = {}

    def look(self) -> ClusterStatus:
        status = self.backend.status(self.name)
        for pod in status.pods:
            assert pod.restarts >= self.restarts.get(pod.index, 0), f"pod {pod.index}'s restarts went down: {status}"
            self.restarts[pod.index] = pod.restarts
            if pod.ready:
                assert pod.phase == "Running" and pod.reason is None, status
                assert status.ranks_up is None or pod.index in status.ranks_up, f"ready, rank down: {status}"
        if cluster_state(status) == "Running":
            assert status.ready_pods == status.size, status
            assert status.ranks_up is not None and set(range(status.size)) <= set(status.ranks_up), status
        return status

    def until(self, check: Callable[[ClusterStatus], bool], what: str, timeout: float = 60.0) -> ClusterStatus:
        seen: list[ClusterStatus] = []

        def looked() -> ClusterStatus | None:
            seen[:] = [self.look()]
            return seen[0] if check(seen[0]) else None

        return wait_until(what, looked, timeout=timeout, interval=0.2, detail=lambda: seen[0])


def _all_up(status: ClusterStatus) -> bool:
    return status.ready_pods == SIZE and status.ranks_up == tuple(range(SIZE)) and cluster_state(status) == "Running"


def test_status_after_a_killed_broker_and_a_killed_pod_process(
    mc: Any, machine: Any, spec_writer: Any, backend: LocalBackend
) -> None:
    spec = spec_writer(machine.state_dir, "ft", size=SIZE, max_size=SIZE, cpu="250m")
    up = mc("up", str(spec), "--detach", env={"MINICLUSTERS_LOCAL_RESTART_DELAY": "0.2"})
    assert up.returncode == 0, up.stderr
    looks = Looks(backend, "ft")
    looks.until(_all_up, "every pod ready and every rank up")

    lead = backend.store.load("ft").pods[0].pid
    assert lead is not None
    os.kill(broker_of(lead), signal.SIGKILL)  # the lead's broker: its pod restarts it, the followers rejoin
    back = looks.until(lambda s: s.pod(0) is not None and s.pod(0).restarts >= 1 and _all_up(s), "the lead back")  # type: ignore[union-attr]
    assert back.pod(0).phase == "Running"  # type: ignore[union-attr]

    follower = backend.store.load("ft").pods[1].pid
    assert follower is not None
    os.kill(follower, signal.SIGKILL)  # the pod's own process (its supervisor): nothing restarts the pod
    down = looks.until(lambda s: s.pod(1) is not None and s.pod(1).phase == "Failed", "pod 1 Failed")  # type: ignore[union-attr]
    assert not down.pod(1).ready and down.pod(1).reason is not None  # type: ignore[union-attr]
    assert (down.running_pods, down.ready_pods, cluster_state(down)) == (SIZE - 1, SIZE - 1, "Degraded")
    for _ in range(5):  # and it stays so
        assert looks.look().pod(1).phase == "Failed"  # type: ignore[union-attr]
