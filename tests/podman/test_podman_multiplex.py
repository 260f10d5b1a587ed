"""examples/multiplex.yaml on real containers: the multiplexing controller runs its simulations once on the podman
backend, resizing the pods in place through the backend's resize_many (each container's cpu.shares).

`proxy_solver` and the PMPI profiler come from the openmpi-openfoam image (built there from our C sources); the
simulations' files live in the pods and reach the controller through exec. Short: 2 simulations of few
iterations instead of the example's 3 long ones. Without podman or the images these skip; under CI they fail.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import yaml

from miniclusters.api.quantity import cpu_millicores
from miniclusters.backends.podman.backend import PodmanBackend
from miniclusters.backends.podman.engine import CONTAINERS_CONF
from miniclusters.backends.podman.observe import millicores_to_shares, read_cpu_shares
from miniclusters.backends.podman.pods import container_name, network_name
from miniclusters.backends.podman.state import PodmanStore
from miniclusters.render import RenderOptions

ROOT = Path(__file__).resolve().parents[2]
OPTIONS = RenderOptions()
MINICLUSTER = str(Path(sys.executable).parent / "minicluster")

IMAGE = f"{OPTIONS.registry}/openmpi-openfoam:{OPTIONS.tag}"


def podman(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CONTAINERS_CONF": os.environ.get("CONTAINERS_CONF", str(CONTAINERS_CONF))}
    return subprocess.run(["podman", *args], capture_output=True, text=True, timeout=300, env=env)


def shares(name: str, index: int) -> int | None:
    """The application container's cpu.shares as the kernel holds it."""
    path = podman("inspect", container_name(name, index, name), "--format", "{{.State.CgroupPath}}").stdout.strip()
    return read_cpu_shares(path)


def leftovers(name: str) -> list[str]:
    """Every pod, container and volume podman still holds for cluster `name`, and its network."""
    found = [
        f"{kind} {n}"
        for kind in ("pod", "container", "volume")
        for n in podman(kind, "ls" if kind == "volume" else "ps", *(() if kind == "volume" else ("-a",)),
                        "--format", "{{.Name}}" if kind == "volume" else "{{.Names}}").stdout.split()
        if n.startswith(f"{name}-")
    ]  # fmt: skip
    if podman("network", "exists", network_name(name)).returncode == 0:
        found.append(f"network {network_name(name)}")
    return found


def test_image_carries_the_proxy_solver_and_the_pmpi_library(images: None) -> None:
    """Built into the application image: the container has no compiler to build them at run time."""
    shown = podman("run", "--rm", IMAGE, "sh", "-c", 'command -v proxy_solver && test -f "$MC_PMPI_LIBRARY" && echo ok')
    assert shown.returncode == 0 and shown.stdout.split()[-1] == "ok", shown.stdout + shown.stderr


def test_multiplex_example_runs_once(images: None, tmp_path: Path) -> None:
    name = f"pmt-mux-{uuid.uuid4().hex[:6]}"
    spec = yaml.safe_load((ROOT / "examples" / "multiplex.yaml").read_text())
    spec["metadata"]["name"] = name
    (tmp_path / "multiplex.yaml").write_text(yaml.safe_dump(spec))
    state = tmp_path / "state"
    env = {**os.environ, "MINICLUSTERS_STATE_DIR": str(state)}
    workdir = tmp_path / "mux"
    try:
        up = subprocess.run(
            [MINICLUSTER, "up", str(tmp_path / "multiplex.yaml"), "--backend", "podman", "--detach"],
            capture_output=True, text=True, timeout=600, env=env,
        )  # fmt: skip
        assert up.returncode == 0, up.stdout + up.stderr
        run = subprocess.run(
            [MINICLUSTER, "multiplex", name, "--backend", "podman", "--command", "proxy_solver 3000 256 8 1,1,1,8",
             "--max", "2", "--total", "2", "--profile-iterations", "30", "--workdir", str(workdir),
             "--timeout", "300", "--json"],
            capture_output=True, text=True, timeout=500, env=env,
        )  # fmt: skip
        summary = json.loads(run.stdout.strip().splitlines()[-1])
        events = [json.loads(line) for line in (workdir / "timeline.jsonl").read_text().splitlines()]
        # the image's proxy_solver ran in the containers, profiled by the image's PMPI library: the ranks' traces,
        # written in the pods, were copied here through exec
        traces = sorted(p.name for p in workdir.glob("*/pmpi/pmpi.*.bin"))
        assert traces, (summary, run.stderr)
        # resized in place through the backend's resize_many: every answer is podman's, the containers'
        # cpu.shares follow the new requests, and no container was recreated or restarted
        answers = [e for e in events if e["kind"] == "resize-answer"]
        assert summary["resizes"] >= 1 and answers, events
        assert all(e["answer"] == "done" and "cpu.shares" in e["reason"] for e in answers), answers
        assert summary["same_pids"] is True, summary
        status = PodmanBackend(store=PodmanStore(state)).status(name)
        requests = {p.index: cpu_millicores(p.cpu_desired or "0") for p in status.pods}
        assert sorted(requests) == [0, 1] and any(m != 1000 for m in requests.values()), requests
        for index, milli in requests.items():
            assert shares(name, index) == millicores_to_shares(milli), (index, requests)
        assert [row["state"] for row in summary["simulations"]] == ["done", "done"], summary
        assert run.returncode == 0, run.stdout + run.stderr
    finally:
        subprocess.run([MINICLUSTER, "down", name, "--backend", "podman"], env=env, timeout=300, capture_output=True)
    assert leftovers(name) == []
