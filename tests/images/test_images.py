"""The images `make images` built (before the tests, in `make test`), run for real with podman.

The broker image's bundle is installed by its init-container command into a volume and run from there inside
the stock debian:12 base (no Python in it) and inside openmpi-openfoam, as a pod would; flux-view carries real
flux-core. On a developer machine without podman or the images these skip; under CI (`CI` set) they fail.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from miniclusters.backends.local.flux_view import VERSION as FLUX_CORE_VERSION
from miniclusters.render import RenderOptions
from miniclusters.render.layout import BROKER_INSTALL_DIR

ROOT = Path(__file__).resolve().parents[2]
CONTAINERS_CONF = ROOT / "images" / "containers.conf"
OPTIONS = RenderOptions()
BROKER = OPTIONS.broker_image
OPENFOAM = f"{OPTIONS.registry}/openmpi-openfoam:{OPTIONS.tag}"
FLUX_VIEW = f"{OPTIONS.registry}/miniclusters-flux-view:{OPTIONS.tag}"
BASE = "debian:12"
FLUX = f"{BROKER_INSTALL_DIR}/bin/flux"


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{reason}; `make test` builds the images first (`make images`)")
    pytest.skip(reason)


def podman(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CONTAINERS_CONF": os.environ.get("CONTAINERS_CONF", str(CONTAINERS_CONF))}
    return subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout, env=env)


def require_image(image: str) -> None:
    if shutil.which("podman") is None:
        _unavailable("podman is not installed (Debian: apt-get install podman runc catatonit)")
    if podman("image", "exists", image).returncode != 0:
        _unavailable(f"image {image} is not built (make images)")


def _installed_volume(*options: str) -> Iterator[str]:
    """A volume filled the way the rendered init container fills the pod's: the broker image's own command."""
    require_image(BROKER)
    name = f"mc-test-broker-{uuid.uuid4().hex[:8]}"
    assert podman("volume", "create", name).returncode == 0
    try:
        argv = [BROKER_INSTALL_DIR, *options] if options else []  # no argument: the image's CMD, as most pods
        installed = podman("run", "--rm", "-v", f"{name}:{BROKER_INSTALL_DIR}", BROKER, *argv)
        assert installed.returncode == 0, installed.stderr
        assert f"installed in {BROKER_INSTALL_DIR}" in installed.stdout
        yield name
    finally:
        podman("volume", "rm", "-f", name)


@pytest.fixture(scope="module")
def broker_volume() -> Iterator[str]:
    """The core copy every pod gets."""
    yield from _installed_volume()


@pytest.fixture(scope="module")
def broker_volume_with_extras() -> Iterator[str]:
    """The copy a campaign's or a bursting lead's pod gets (`--with-extras`): numpy, matplotlib, the client."""
    yield from _installed_volume("--with-extras")


def test_a_pod_s_copy_leaves_the_extras_in_the_image(broker_volume: str, broker_volume_with_extras: str) -> None:
    """numpy, matplotlib and the Kubernetes client import only where they were asked for; quantities parse in
    both (the client's quantity.py is part of the core)."""
    probe = (
        "import importlib.util as u; from elasticity.model.resources import parse_quantity; "
        "print([m for m in ('numpy', 'matplotlib', 'kubernetes') if u.find_spec(m)], parse_quantity('250m'))"
    )
    script = f'{BROKER_INSTALL_DIR}/bin/python3 -c "{probe}"'
    core = run_with_broker(BASE, broker_volume, script)
    assert core.returncode == 0 and core.stdout.split("\n")[-2] == "[] 0.250", core.stdout + core.stderr
    full = run_with_broker(BASE, broker_volume_with_extras, script)
    assert full.returncode == 0, full.stderr
    assert full.stdout.split("\n")[-2] == "['numpy', 'matplotlib', 'kubernetes'] 0.250", full.stdout


def run_with_broker(image: str, volume: str, script: str) -> subprocess.CompletedProcess[str]:
    """`sh -c SCRIPT` in IMAGE with the installed broker volume mounted read-only, as the pod's main container."""
    require_image(image)
    return podman("run", "--rm", "-v", f"{volume}:{BROKER_INSTALL_DIR}:ro", image, "sh", "-c", script)


def assert_builtin_flux_version(output: str) -> None:
    assert re.search(r"^commands:\s+\d+\.\d+", output, re.MULTILINE), output
    assert "broker:" in output and "miniclusters built-in" in output, output


def test_broker_bundle_runs_in_stock_debian_without_python(broker_volume: str) -> None:
    result = run_with_broker(
        BASE,
        broker_volume,
        f"if command -v python3 || ls /usr/bin/python*; then echo PYTHON-PRESENT; fi; {FLUX} version",
    )
    assert result.returncode == 0, result.stderr
    assert "PYTHON-PRESENT" not in result.stdout, "the base image must have no Python for this test to mean much"
    assert_builtin_flux_version(result.stdout)


# What a bundled process must not load or do at start: every `flux` command in a pod starts one. Packaging
# tools came with PyInstaller's run-time hooks for them (pkg_resources imported at every start: 0.3 s, 15 MB);
# the others are what images/broker/miniclusters.spec drops or miniclusters/frozen.py no longer imports (the
# lean job CLI itself loads neither typing, re nor enum).
NOT_AT_START = (
    *("pkg_resources", "setuptools", "multiprocessing", "inspect", "dataclasses", "pathlib", "runpy"),
    *("pkgutil", "typing", "re", "enum"),
)


def test_broker_bundle_starts_without_packaging_tools_or_a_scratch_directory(broker_volume: str) -> None:
    probe = "import os, sys; print(sorted(sys.modules)); print(os.environ.get('MPLCONFIGDIR', 'unset'))"
    result = run_with_broker(BASE, broker_volume, f'{BROKER_INSTALL_DIR}/bin/python3 -c "{probe}"')
    assert result.returncode == 0, result.stderr
    modules, mplconfig = result.stdout.splitlines()[-2:]
    loaded = [name for name in NOT_AT_START if f"'{name}'" in modules]
    assert loaded == [], f"loaded at the bundle's start: {loaded}"
    assert mplconfig == "unset", "a run-time hook made a temporary MPLCONFIGDIR for this process"


def test_broker_bundle_draws_a_png_quietly_where_home_is_not_writable(broker_volume_with_extras: str) -> None:
    """Without PyInstaller's hook, matplotlib still gets a private config directory (at its first import)."""
    draw = (
        "from matplotlib.figure import Figure; from matplotlib.backends.backend_agg import FigureCanvasAgg; "
        "f = Figure(); FigureCanvasAgg(f); f.add_subplot().plot([1, 2]); f.savefig('/tmp/plot.png'); "
        "print(open('/tmp/plot.png', 'rb').read(8))"
    )
    script = f'HOME=/nonexistent {BROKER_INSTALL_DIR}/bin/python3 -c "{draw}"'
    result = run_with_broker(BASE, broker_volume_with_extras, script)
    assert result.returncode == 0, result.stderr
    assert "PNG" in result.stdout
    assert "temporary cache directory" not in result.stderr, result.stderr


def test_broker_bundle_starts_an_instance_and_runs_jobs_without_python(broker_volume: str) -> None:
    """flux start spawns brokers and helpers (sys.executable -m ...) from the bundle: all must work in the copy."""
    script = (
        f'export PATH="{BROKER_INSTALL_DIR}/bin:$PATH"; '
        "flux start --test-size=2 sh -c 'flux submit -N2 -n2 --wait echo ran >/dev/null && flux run -n2 echo hi "
        "&& flux jobs -a --no-header | wc -l'"
    )
    result = run_with_broker(BASE, broker_volume, script)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.split()
    assert lines[:2] == ["hi", "hi"] and lines[-1] == "2", result.stdout


def test_broker_bundle_serves_the_rest_api(broker_volume: str) -> None:
    """The lead's REST server is started as `sys.executable -m broker.rest.server`: the bundle's python3 name."""
    client = (
        "import json, time, urllib.request\n"
        "for _ in range(300):\n"
        "    try:\n"
        "        print(urllib.request.urlopen('http://127.0.0.1:5000/v1/nodes', timeout=2).read().decode()); break\n"
        "    except OSError:\n"
        "        time.sleep(0.1)\n"
    )
    script = (
        f'export PATH="{BROKER_INSTALL_DIR}/bin:$PATH" FLUX_REQUIRE_AUTH=false; '
        f'flux start --test-size=1 -o -Srestful.port=5000 python3 -c "{client}"'
    )
    result = run_with_broker(BASE, broker_volume, script)
    assert result.returncode == 0, result.stderr
    assert '"nodes"' in result.stdout, result.stdout + result.stderr


def test_broker_bundle_in_the_openmpi_openfoam_image(broker_volume: str) -> None:
    script = (
        # /data: the image's WORKDIR must exist in it (kube play's runc start fails on a missing one)
        f"test -d /data && {FLUX} version && command -v mpi-hello && mpirun --oversubscribe -n 2 mpi-hello && "
        "command -v simpleFoam >/dev/null || ls /usr/lib/openfoam/*/platforms/*/bin/simpleFoam >/dev/null"
    )
    result = run_with_broker(OPENFOAM, broker_volume, script)
    assert result.returncode == 0, result.stdout + result.stderr
    assert_builtin_flux_version(result.stdout)
    assert "/mpi-hello" in result.stdout
    assert sorted(re.findall(r"hello from rank (\d) of 2", result.stdout)) == ["0", "1"], result.stdout


def test_flux_view_carries_real_flux_core_in_the_operator_layout() -> None:
    require_image(FLUX_VIEW)
    script = (
        "/opt/view/bin/flux version && test -d /opt/software && "
        "flux start --test-size=1 flux run -n1 echo real-flux-ran && "
        "python3 -c 'import flux, broker.rest.flux_service; print(\"bindings:\", flux.__file__)'"
    )
    result = podman("run", "--rm", FLUX_VIEW, "sh", "-c", script)
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(rf"^libflux-core:\s+{re.escape(FLUX_CORE_VERSION)}$", result.stdout, re.MULTILINE), result.stdout
    assert "real-flux-ran" in result.stdout
    assert f"bindings: /opt/software/flux-core-{FLUX_CORE_VERSION}/" in result.stdout


def test_a_second_build_is_a_no_op_when_nothing_changed(tmp_path: Path) -> None:
    """`make images` builds once per content: the hash of an unchanged image's inputs is the one it was built with
    (nothing in it varies from run to run), so build.sh keeps the image."""
    require_image(OPENFOAM)
    env = {**os.environ, "IMAGES": "openmpi-openfoam", "MINICLUSTERS_IMAGES_CACHE": str(tmp_path), "DRY_RUN": "1"}
    env.setdefault("CONTAINERS_CONF", str(CONTAINERS_CONF))
    result = subprocess.run(
        ["sh", str(ROOT / "images" / "build.sh")], capture_output=True, text=True, timeout=120, env=env
    )
    assert result.returncode == 0, result.stderr
    if "would build" in result.stdout and not os.environ.get("CI"):
        pytest.skip(f"{OPENFOAM} is older than its sources (make images)")
    assert f"{OPENFOAM}: up to date" in result.stdout, result.stdout
    assert (tmp_path / "openmpi-openfoam.hash").read_text().strip() in result.stdout
