"""`status` on podman tells the truth after faults (issue 41): a follower killed with `podman kill` is down for good
(it said "CrashLoopBackOff, 0 restarts" and counted it running), a lead killed and started again by hand is not
"Running, all ready" while the followers' ranks are down, and no pod's RESTARTS ever goes down (the lead's went
from 1 back to 0). Every look at the cluster is held to those rules. Without podman or the images these skip."""

from __future__ import annotations

import os
import signal
import subprocess
import uuid
from collections.abc import Callable, Iterator

import pytest

from miniclusters.api import load_minicluster
from miniclusters.backends.base import ClusterStatus, CreateOptions
from miniclusters.backends.podman.backend import PodmanBackend
from miniclusters.backends.podman.engine import CONTAINERS_CONF
from miniclusters.backends.podman.pods import container_name
from miniclusters.backends.podman.state import PodmanStore
from miniclusters.backends.states import cluster_state
from miniclusters.render import RenderOptions
from tests.waiting import wait_until

OPTIONS = RenderOptions()
APP_IMAGE = f"{OPTIONS.registry}/openmpi-openfoam:{OPTIONS.tag}"
SIZE = 3


def podman(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CONTAINERS_CONF": os.environ.get("CONTAINERS_CONF", str(CONTAINERS_CONF))}
    return subprocess.run(["podman", *args], capture_output=True, text=True, timeout=300, env=env)


class Looks:
    """Every status taken, each checked against the rules a true status keeps."""

    def __init__(self, backend: PodmanBackend, name: str) -> None:
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

    def until(self, check: Callable[[ClusterStatus], bool], what: str, timeout: float = 180.0) -> ClusterStatus:
        seen: list[ClusterStatus] = []

        def looked() -> ClusterStatus | None:
            seen[:] = [self.look()]
            return seen[0] if check(seen[0]) else None

        return wait_until(what, looked, timeout=timeout, interval=1.0, detail=lambda: seen[0])


def _all_up(status: ClusterStatus) -> bool:
    return status.ready_pods == SIZE and status.ranks_up == tuple(range(SIZE)) and cluster_state(status) == "Running"


@pytest.fixture(scope="module")
def cluster(images: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[PodmanBackend, str]]:
    name = f"pmt-ft-{uuid.uuid4().hex[:6]}"
    backend = PodmanBackend(store=PodmanStore(tmp_path_factory.mktemp("podman-state")))
    spec = {
        "size": SIZE,
        "maxSize": SIZE,
        "interactive": True,
        "containers": [{"image": APP_IMAGE, "resources": {"requests": {"cpu": "250m"}}}],
    }
    mc = load_minicluster(
        {"apiVersion": "miniclusters.dev/v1alpha1", "kind": "MiniCluster", "metadata": {"name": name}, "spec": spec}
    )
    backend.create(mc, CreateOptions(timeout=300))
    try:
        yield backend, name
    finally:
        if backend.store.exists(name):
            backend.delete(name)


def test_status_after_podman_kill_and_start_of_a_follower_and_the_lead(cluster: tuple[PodmanBackend, str]) -> None:
    backend, name = cluster
    looks = Looks(backend, name)
    looks.until(_all_up, "every pod ready and every rank up")

    # A follower killed by hand: podman will not restart it, so it is down, not crash-looping.
    assert podman("kill", container_name(name, 1, name)).returncode == 0
    down = looks.until(lambda s: s.pod(1) is not None and s.pod(1).phase == "Failed", "pod 1 Failed")  # type: ignore[union-attr]
    assert (down.pod(1).reason, down.pod(1).exit_code, down.pod(1).ready) == ("Error", 137, False)  # type: ignore[union-attr]
    assert (down.running_pods, down.ready_pods, cluster_state(down)) == (SIZE - 1, SIZE - 1, "Degraded")

    # Started again by hand: that is a restart, and the pod comes back as rank 1.
    assert podman("start", container_name(name, 1, name)).returncode == 0
    back = looks.until(_all_up, "pod 1 back as rank 1")
    assert back.pod(1).restarts >= 1  # type: ignore[union-attr]

    # The lead killed (podman restarts it), then killed by hand and started again (podman's count goes to 0).
    pid = int(podman("inspect", container_name(name, 0, name), "--format", "{{.State.Pid}}").stdout)
    os.kill(pid, signal.SIGKILL)
    once = looks.until(lambda s: s.pod(0) is not None and s.pod(0).restarts >= 1 and _all_up(s), "the lead back")  # type: ignore[union-attr]
    assert podman("kill", container_name(name, 0, name)).returncode == 0
    looks.until(lambda s: s.pod(0) is not None and s.pod(0).phase == "Failed", "the lead Failed")  # type: ignore[union-attr]
    assert podman("start", container_name(name, 0, name)).returncode == 0
    again = looks.until(_all_up, "every rank back after the lead's start by hand")
    assert again.pod(0).restarts >= once.pod(0).restarts + 1  # type: ignore[union-attr]
