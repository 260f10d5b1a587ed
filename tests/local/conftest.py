"""Fixtures for real local clusters: a short private state directory, the CLI as a subprocess, and a clean-up that
always removes processes, namespaces, veths, bridges and cgroups, then fails the test if anything was left."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from miniclusters.backends.local import cgroups, netns, plan, process, slots
from miniclusters.backends.local.backend import LocalBackend
from miniclusters.backends.local.state import StateStore
from tests.waiting import wait_until

BIN = Path(sys.executable).parent
MINICLUSTER = str(BIN / "minicluster")
FLUX = str(BIN / "flux")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "needs_root: network namespaces and cgroups (CI runs as root)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root_skip = pytest.mark.skip(reason="network namespaces and cgroups need root (CI runs as root)")
    for item in items:
        if item.get_closest_marker("needs_root") and os.geteuid() != 0:
            if os.environ.get("CI"):
                raise pytest.UsageError("CI must run the local-backend tests as root")
            item.add_marker(root_skip)


def write_spec(
    directory: Path,
    name: str,
    size: int = 2,
    max_size: int | None = 4,
    min_size: int = 1,
    interactive: bool = True,
    command: str = "",
    cpu: str | None = "500m",
    launcher: bool = False,
    tasks: int = 1,
) -> Path:
    container: dict[str, Any] = {"image": "local"}
    if command:
        container["command"] = command
    if launcher:
        container["launcher"] = True
    if cpu:
        container["resources"] = {"requests": {"cpu": cpu}}
    spec: dict[str, Any] = {"size": size, "tasks": tasks, "containers": [container]}
    if max_size is not None:
        spec["maxSize"] = max_size
    if min_size:
        spec["minSize"] = min_size
    if interactive:
        spec["interactive"] = True
    data = {"apiVersion": "miniclusters.dev/v1alpha1", "kind": "MiniCluster", "metadata": {"name": name}, "spec": spec}
    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


class Machine:
    """What a test's clusters may leave on this machine, and the means to remove it."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.names: set[str] = set()
        self.slots: set[int] = set()

    def remember(self) -> None:
        store = StateStore(self.state_dir)
        for name in store.names():
            self.names.add(name)
            with contextlib.suppress(OSError, ValueError):
                self.slots.add(store.load(name).slot)

    def leftovers(self) -> list[str]:
        found = [f"process {pid}" for pid in process.tagged(f"{self.state_dir}/", prefix=True)]
        if os.geteuid() == 0:
            namespaces = netns.list_namespaces()
            found += [f"netns {n}" for n in namespaces if any(n.startswith(f"mc-{name}-") for name in self.names)]
            links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
            claims = slots.live_claims()
            for slot in self.slots:
                holder = claims.get(slot)
                if holder is not None and not holder.is_relative_to(self.state_dir):
                    continue  # released by this test and claimed since by another run on this machine: theirs
                for word in (plan.bridge_name(slot), f"{plan.veth_name(slot, 0)[:-1]}"):
                    if f" {word}" in links:
                        found.append(f"link {word}*")
            driver = cgroups.detect()
            if driver is not None:
                found += [f"cgroup {driver.cluster_dir(n)}" for n in self.names if driver.cluster_dir(n).exists()]
            found += [f"/etc/netns/mc-{n}-*" for n in self.names if list(Path("/etc/netns").glob(f"mc-{n}-*"))]
        return found

    def force_clean(self) -> None:
        for pid in process.tagged(f"{self.state_dir}/", prefix=True):
            with contextlib.suppress(OSError):
                os.kill(pid, 9)
        if os.geteuid() != 0:
            return
        for name in self.names:
            for namespace in netns.list_namespaces():
                if namespace.startswith(f"mc-{name}-"):
                    subprocess.run(["ip", "netns", "del", namespace], capture_output=True)
            driver = cgroups.detect()
            if driver is not None:
                with contextlib.suppress(cgroups.CgroupError):
                    driver.remove_cluster(name)
            for path in Path("/etc/netns").glob(f"mc-{name}-*"):
                shutil.rmtree(path, ignore_errors=True)
        claims = slots.live_claims()
        for slot in self.slots:
            holder = claims.get(slot)
            if holder is None or holder.is_relative_to(self.state_dir):  # never another run's live bridge
                subprocess.run(["ip", "link", "del", plan.bridge_name(slot)], capture_output=True)


@pytest.fixture
def machine(monkeypatch: pytest.MonkeyPatch) -> Iterator[Machine]:
    """A short state directory (broker sockets must fit in 107 characters) and a guaranteed clean-up."""
    state_dir = Path(tempfile.mkdtemp(prefix="mct", dir="/tmp"))
    monkeypatch.setenv("MINICLUSTERS_STATE_DIR", str(state_dir))
    monkeypatch.delenv("MINICLUSTERS_LOCAL_UNPRIVILEGED", raising=False)
    monkeypatch.delenv("MINICLUSTER_BACKEND", raising=False)
    monkeypatch.setenv("OMPI_ALLOW_RUN_AS_ROOT", "1")
    monkeypatch.setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    box = Machine(state_dir)
    try:
        yield box
    finally:
        box.remember()
        store = StateStore(state_dir)
        for name in store.names():
            with contextlib.suppress(Exception):
                LocalBackend(state_dir=state_dir, notify=lambda _m: None).delete(name)
        left: list[str] = []
        try:
            wait_until("the deleted clusters' processes go", lambda: not box.leftovers(), timeout=10, interval=0.2)
        except AssertionError:
            left = box.leftovers()  # what is still there past the deadline
        box.force_clean()
        shutil.rmtree(state_dir, ignore_errors=True)
        assert not left, f"left behind after the test: {left}"


@pytest.fixture
def mc(machine: Machine) -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run the `minicluster` CLI (a real process: real signals, real exit codes)."""

    def run(*args: str, timeout: float = 90, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        started = time.monotonic()
        result = subprocess.run(
            [MINICLUSTER, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, **(env or {})},
        )
        machine.remember()
        if os.environ.get("MC_TEST_TIMES"):
            print(f"{time.monotonic() - started:6.2f}s minicluster {' '.join(args)[:60]} -> {result.returncode}")
        return result

    return run


@pytest.fixture
def spec_writer() -> Callable[..., Path]:
    return write_spec


@pytest.fixture
def waiter() -> Callable[..., Any]:
    return wait_for


@pytest.fixture
def minicluster_bin() -> str:
    return MINICLUSTER


@pytest.fixture
def backend(machine: Machine) -> LocalBackend:
    return LocalBackend(state_dir=machine.state_dir, notify=lambda _m: None)


def wait_for(predicate: Callable[[], Any], timeout: float = 20.0, interval: float = 0.2) -> Any:
    """Poll until predicate() is truthy (tests/waiting.py); its last value (falsy) when the time runs out, for
    the caller's `assert waiter(...), <what it says about the state>`."""
    try:
        return wait_until("the local test's condition", predicate, timeout=timeout, interval=interval)
    except AssertionError:
        return predicate()
