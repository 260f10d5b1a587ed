"""The podman tests' one precondition: podman, root and our images. Skip on a developer machine without them;
fail under CI, where `make test` installs podman and builds the images first."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from miniclusters.backends.podman.engine import CONTAINERS_CONF
from miniclusters.render import RenderOptions

OPTIONS = RenderOptions()
APP_IMAGE = f"{OPTIONS.registry}/openmpi-openfoam:{OPTIONS.tag}"


def run_podman(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CONTAINERS_CONF": os.environ.get("CONTAINERS_CONF", str(CONTAINERS_CONF))}
    return subprocess.run(["podman", *args], capture_output=True, text=True, timeout=300, env=env)


@pytest.fixture(scope="session")
def images() -> None:
    reason = None
    if shutil.which("podman") is None:
        reason = "podman is not installed (Debian: apt-get install podman runc catatonit)"
    elif os.geteuid() != 0:
        reason = "the podman backend's tests run as root (rootful podman, cgroup cpu.shares)"
    elif any(run_podman("image", "exists", i).returncode for i in (OPTIONS.broker_image, APP_IMAGE)):
        reason = "the images are not built (make images)"
    if reason and os.environ.get("CI"):
        pytest.fail(f"{reason}; `make test` installs podman and builds the images first (`make images`)")
    if reason:
        pytest.skip(reason)
