"""The podman backend on real containers: the rendered MiniCluster from the images `make images` built.

`minicluster up examples/hello.yaml --backend podman` runs MPI across 4 containers; one elastic cluster (shared by
the tests below, module-scoped, to keep `make test` short) is scaled 2 -> 4 -> 2, resized in place, has a follower
killed, and is removed leaving nothing. Without podman or the images these skip; under CI (`CI` set) they fail.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from miniclusters.api import load_minicluster
from miniclusters.backends.base import ClusterStatus, CreateOptions, InvalidRequestError, ResizeOutcome
from miniclusters.backends.podman.backend import PodmanBackend
from miniclusters.backends.podman.engine import CONTAINERS_CONF
from miniclusters.backends.podman.observe import read_cpu_shares
from miniclusters.backends.podman.pods import container_name, network_name
from miniclusters.backends.podman.state import PodmanStore
from miniclusters.render import RenderOptions
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
OPTIONS = RenderOptions()
MINICLUSTER = str(Path(sys.executable).parent / "minicluster")
IMAGES = (OPTIONS.broker_image, f"{OPTIONS.registry}/openmpi-openfoam:{OPTIONS.tag}")


def podman(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CONTAINERS_CONF": os.environ.get("CONTAINERS_CONF", str(CONTAINERS_CONF))}
    return subprocess.run(["podman", *args], capture_output=True, text=True, timeout=300, env=env)


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{reason}; `make test` installs podman and builds the images first (`make images`)")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def images() -> None:
    if shutil.which("podman") is None:
        _unavailable("podman is not installed (Debian: apt-get install podman runc catatonit)")
    if os.geteuid() != 0:
        _unavailable("the podman backend's tests run as root (rootful podman, cgroup cpu.shares)")
    for image in IMAGES:
        if podman("image", "exists", image).returncode != 0:
            _unavailable(f"image {image} is not built (make images)")


def leftovers(name: str) -> list[str]:
    """Every pod, container, volume and network podman still holds for cluster `name`."""
    found = []
    for kind in ("pod", "container"):
        listed = podman(kind, "ps", "-a", "--format", "{{.Names}}").stdout.split()
        found += [f"{kind} {n}" for n in listed if n.startswith(f"{name}-")]
    found += [
        f"volume {v}"
        for v in podman("volume", "ls", "--format", "{{.Name}}").stdout.split()
        if v.startswith(f"{name}-")
    ]
    if podman("network", "exists", network_name(name)).returncode == 0:
        found.append(f"network {network_name(name)}")
    return found


def wait_for(check: Callable[[], ClusterStatus | None], what: str, timeout: float = 120.0) -> ClusterStatus:
    return wait_until(what, check, timeout=timeout, interval=1.0)


def test_hello_runs_mpi_across_four_containers(images: None, tmp_path: Path) -> None:
    """The acceptance line, through the CLI: 4 pods, 4 distinct hostnames from MPI, the lead's exit code, and
    (no --keep) nothing left afterwards."""
    name = f"pmt-hello-{uuid.uuid4().hex[:6]}"
    spec = yaml.safe_load((ROOT / "examples" / "hello.yaml").read_text())
    spec["metadata"]["name"] = name
    (tmp_path / "hello.yaml").write_text(yaml.safe_dump(spec))
    env = {**os.environ, "MINICLUSTERS_STATE_DIR": str(tmp_path / "state")}
    try:
        done = subprocess.run(
            [MINICLUSTER, "up", str(tmp_path / "hello.yaml"), "--backend", "podman"],
            capture_output=True,
            text=True,
            timeout=600,
            env=env,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        hosts = re.findall(rf"hello from rank (\d) of 4 on ({name}-\d)", done.stdout)
        assert sorted(hosts) == [(str(i), f"{name}-{i}") for i in range(4)], done.stdout
        assert leftovers(name) == []
    finally:
        if leftovers(name):
            subprocess.run([MINICLUSTER, "down", name, "--backend", "podman"], env=env, timeout=300)


@pytest.fixture(scope="module")
def elastic(images: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[PodmanBackend, str]]:
    """One interactive cluster of 2 pods (4 registered hosts), shared by the tests below."""
    name = f"pmt-el-{uuid.uuid4().hex[:6]}"
    backend = PodmanBackend(store=PodmanStore(tmp_path_factory.mktemp("podman-state")))
    mc = load_minicluster(
        {
            "apiVersion": "miniclusters.dev/v1alpha1",
            "kind": "MiniCluster",
            "metadata": {"name": name},
            "spec": {
                "size": 2,
                "maxSize": 4,
                "interactive": True,
                "containers": [{"image": IMAGES[1], "resources": {"requests": {"cpu": "500m"}}}],
            },
        }
    )
    status = backend.create(mc, CreateOptions(timeout=300))
    assert status.ranks_up == (0, 1), status
    try:
        yield backend, name
    finally:
        if backend.store.exists(name):
            backend.delete(name)


def _hostnames(backend: PodmanBackend, name: str, nodes: int) -> list[str]:
    result = backend.exec(name, 0, ["flux", "run", "-N", str(nodes), "hostname"])
    assert result.rc == 0, result.stderr
    return sorted(result.stdout.split())


def _ranks(backend: PodmanBackend, name: str, up: tuple[int, ...]) -> ClusterStatus:
    def check() -> ClusterStatus | None:
        status = backend.status(name)
        return status if status.ranks_up == up else None

    return wait_for(check, f"ranks {up} up")


def _pid(name: str, index: int) -> int:
    return int(podman("inspect", container_name(name, index, name), "--format", "{{.State.Pid}}").stdout)


def _shares(name: str, index: int) -> int | None:
    path = podman("inspect", container_name(name, index, name), "--format", "{{.State.CgroupPath}}").stdout.strip()
    return read_cpu_shares(path)


def test_scale_two_four_two(elastic: tuple[PodmanBackend, str]) -> None:
    backend, name = elastic
    assert _hostnames(backend, name, 2) == [f"{name}-0", f"{name}-1"]
    backend.scale(name, 4)
    status = _ranks(backend, name, (0, 1, 2, 3))
    assert [p.index for p in status.pods] == [0, 1, 2, 3] and status.size == 4
    assert _hostnames(backend, name, 4) == [f"{name}-{i}" for i in range(4)]
    lead_pid = _pid(name, 0)
    backend.scale(name, 2)
    status = _ranks(backend, name, (0, 1))
    assert [p.index for p in status.pods] == [0, 1] and status.ranks_down == (2, 3)
    assert _pid(name, 0) == lead_pid  # the lead was never touched
    with pytest.raises(InvalidRequestError, match="size 5"):
        backend.scale(name, 5)  # past the 4 registered hosts: refused, nothing changed
    assert backend.status(name).size == 2


def test_resize_in_place_keeps_the_processes(elastic: tuple[PodmanBackend, str]) -> None:
    backend, name = elastic
    before = _pid(name, 1)
    assert _shares(name, 1) == 512  # the 500m request, as the kubelet maps it
    result = backend.resize(name, 1, "250m")
    assert result.outcome == ResizeOutcome.DONE and result.cpu_actual == "250m"
    assert _shares(name, 1) == 256 and _pid(name, 1) == before
    status = backend.status(name)
    assert status.pod(1).cpu_actual == "250m" and status.pod(1).restarts == 0  # type: ignore[union-attr]
    view = backend.observe(name)  # the Observer port the loops read
    assert [(p.index, p.cpu_request, p.cpu_actual) for p in view.pods] == [(0, 500, 500), (1, 250, 250)]
    assert view.max_size == 4 and view.size == 2
    refused = backend.resize(name, 1, "64")
    assert refused.outcome == ResizeOutcome.INFEASIBLE and _shares(name, 1) == 256


def test_a_killed_follower_restarts_and_rejoins_as_the_same_rank(elastic: tuple[PodmanBackend, str]) -> None:
    backend, name = elastic
    before = _pid(name, 1)
    os.kill(before, 9)

    def restarted() -> ClusterStatus | None:
        status = backend.status(name)
        pod = status.pod(1)
        ok = pod is not None and pod.restarts >= 1 and pod.phase == "Running" and status.ranks_up == (0, 1)
        return status if ok else None

    status = wait_for(restarted, "pod 1 restarted and rank 1 back up")
    assert _pid(name, 1) != before
    assert backend.exec(name, 1, ["hostname"]).stdout.strip() == f"{name}-1"
    assert _hostnames(backend, name, 2) == [f"{name}-0", f"{name}-1"]
    recorded = backend.store.load(name).cpu_of(1)
    assert status.pod(1).cpu_actual == status.pod(1).cpu_desired  # type: ignore[union-attr]
    assert _shares(name, 1) == recorded * 1024 // 1000  # type: ignore[operator]


def test_logs_and_down_leave_nothing(elastic: tuple[PodmanBackend, str]) -> None:
    backend, name = elastic
    assert any("lead broker starting" in line for line in backend.logs(name, 0))
    backend.delete(name)
    assert leftovers(name) == []
    assert not backend.store.exists(name)


def test_flux_flavour_runs_real_flux_core_across_containers(images: None, tmp_path: Path) -> None:
    """The `flux` flavour: the flux-view init container copies flux-core 0.88 in; the brokers are real Flux."""
    view = f"{OPTIONS.registry}/miniclusters-flux-view:{OPTIONS.tag}"
    if podman("image", "exists", view).returncode != 0:
        _unavailable(f"image {view} is not built (make images)")
    name = f"pmt-fx-{uuid.uuid4().hex[:6]}"
    backend = PodmanBackend(store=PodmanStore(tmp_path))
    mc = load_minicluster(
        {
            "apiVersion": "miniclusters.dev/v1alpha1",
            "kind": "MiniCluster",
            "metadata": {"name": name},
            "spec": {
                "size": 2,
                "tasks": 2,
                "flux": {"flavour": "flux", "container": {"image": view}},
                "containers": [{"image": view, "command": "hostname"}],
            },
        }
    )
    try:
        backend.create(mc, CreateOptions(timeout=300))
        status = wait_for(lambda: s if (s := backend.status(name)).finished else None, "the lead to finish")
        assert status.succeeded and status.pod(0).exit_code == 0  # type: ignore[union-attr]
        lines = list(backend.logs(name, 0))
        assert {f"{name}-0", f"{name}-1"} <= {line.strip() for line in lines}, lines
        assert any(f"online: {name}-[0-1] (ranks 0-1)" in line for line in lines), lines  # flux-core's broker
    finally:
        if backend.store.exists(name):
            backend.delete(name)
    assert leftovers(name) == []


def test_flux_flavour_runs_mpi_across_four_application_containers(images: None, tmp_path: Path) -> None:
    """`--flavour flux` on examples/hello.yaml: the application image (openmpi-openfoam: no Python, none of
    flux-core's libraries) runs real flux-core from the view the init container copied in (our flux-view image,
    in place of the Flux Operator's default), and MPI across the 4 containers prints 4 distinct pod hostnames."""
    view = f"{OPTIONS.registry}/miniclusters-flux-view:{OPTIONS.tag}"
    if podman("image", "exists", view).returncode != 0:
        _unavailable(f"image {view} is not built (make images)")
    name = f"pmt-fxmpi-{uuid.uuid4().hex[:6]}"
    spec = yaml.safe_load((ROOT / "examples" / "hello.yaml").read_text())
    spec["metadata"]["name"] = name
    (tmp_path / "hello.yaml").write_text(yaml.safe_dump(spec))
    env = {**os.environ, "MINICLUSTERS_STATE_DIR": str(tmp_path / "state")}
    try:
        done = subprocess.run(
            [MINICLUSTER, "up", str(tmp_path / "hello.yaml"), "--backend", "podman", "--flavour", "flux"],
            capture_output=True,
            text=True,
            timeout=600,
            env=env,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        hosts = re.findall(rf"hello from rank (\d) of 4 on ({name}-\d)", done.stdout)
        assert sorted(hosts) == [(str(i), f"{name}-{i}") for i in range(4)], done.stdout + done.stderr
        assert leftovers(name) == []
    finally:
        if leftovers(name):
            subprocess.run([MINICLUSTER, "down", name, "--backend", "podman"], env=env, timeout=300)
