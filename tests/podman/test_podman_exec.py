"""`minicluster exec` on podman ends its command in the container when it is ended itself or times out (issue 41):
a killed `podman exec` leaves the exec'd process running there, as a closed stream does on Kubernetes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from miniclusters.api import load_minicluster
from miniclusters.backends.base import BackendError, CreateOptions
from miniclusters.backends.podman.backend import PodmanBackend
from miniclusters.backends.podman.engine import CONTAINERS_CONF
from miniclusters.backends.podman.pods import container_name
from miniclusters.backends.podman.state import PodmanStore
from miniclusters.render import RenderOptions
from tests.waiting import wait_until

OPTIONS = RenderOptions()
APP_IMAGE = f"{OPTIONS.registry}/openmpi-openfoam:{OPTIONS.tag}"
MINICLUSTER = str(Path(sys.executable).parent / "minicluster")
PIDS = "/tmp/exec-test-pids"
# The shell, a child, and a child that left the session and ignores SIGTERM and SIGHUP.
SCRIPT = (
    f"sleep 300 & a=$!; (trap '' TERM HUP; exec setsid sleep 301) & echo $$ $a $! > {PIDS}.t; mv {PIDS}.t {PIDS}; wait"
)


@pytest.fixture(scope="module")
def cluster(images: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[PodmanBackend, str, Path]]:
    name = f"pmt-ex-{uuid.uuid4().hex[:6]}"
    state = tmp_path_factory.mktemp("podman-state")
    backend = PodmanBackend(store=PodmanStore(state))
    spec = {"size": 1, "interactive": True, "containers": [{"image": APP_IMAGE}]}
    mc = load_minicluster(
        {"apiVersion": "miniclusters.dev/v1alpha1", "kind": "MiniCluster", "metadata": {"name": name}, "spec": spec}
    )
    backend.create(mc, CreateOptions(timeout=300))
    try:
        yield backend, name, state
    finally:
        if backend.store.exists(name):
            backend.delete(name)


def run_podman(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CONTAINERS_CONF": os.environ.get("CONTAINERS_CONF", str(CONTAINERS_CONF))}
    return subprocess.run(["podman", *args], capture_output=True, text=True, timeout=300, env=env)


def _in_container(name: str, script: str) -> subprocess.CompletedProcess[str]:
    return run_podman("exec", container_name(name, 0, name), "sh", "-c", script)


def _started(name: str) -> list[int]:
    said = wait_until(
        "the command starts in the container",
        lambda: _in_container(name, f"cat {PIDS} 2>/dev/null").stdout.strip(),
        timeout=60,
        interval=0.2,
    )
    _in_container(name, f"rm -f {PIDS}")
    return [int(p) for p in said.split()]


def _running(name: str, pids: list[int]) -> list[int]:
    """Those of `pids` alive in the container (zombies are not)."""
    script = (
        'for p in "$@"; do s=$(cat /proc/$p/stat 2>/dev/null) && case "${s##*) }" in Z*) ;; *) echo $p;; esac; done'
    )
    done = run_podman("exec", container_name(name, 0, name), "sh", "-c", script, "sh", *map(str, pids))
    return [int(p) for p in done.stdout.split()]


def _gone(name: str, pids: list[int]) -> list[int]:
    """[] once the processes ended; fails naming those still running past 20 s."""
    wait_until(
        f"processes {pids} end",
        lambda: not _running(name, pids),
        timeout=20,
        interval=0.5,
        detail=lambda: _running(name, pids),
    )
    return []


def test_sigterm_to_minicluster_exec_ends_the_command_in_the_container(
    cluster: tuple[PodmanBackend, str, Path],
) -> None:
    _backend, name, state = cluster
    env = {**os.environ, "MINICLUSTERS_STATE_DIR": str(state)}
    argv = [MINICLUSTER, "exec", name, "--backend", "podman", "--", "sh", "-c", SCRIPT]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        started = _started(name)
        assert len(_running(name, started)) == 3
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert _gone(name, started) == []
    assert proc.returncode == 128 + signal.SIGTERM and "Traceback" not in err, err


def test_an_exec_past_its_timeout_is_ended_in_the_container(cluster: tuple[PodmanBackend, str, Path]) -> None:
    backend, name, _state = cluster
    with pytest.raises(BackendError):
        backend.exec(name, 0, ["sh", "-c", SCRIPT], timeout=3.0)
    started = _started(name)
    assert _gone(name, started) == []
