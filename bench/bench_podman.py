"""The podman backend beside the local backend: `up` time for 4 pods and `flux run true` latency (figures + JSON).

For each backend an interactive 4-pod MiniCluster (builtin flavour, the openmpi-openfoam image on podman) is
created and timed until every broker has joined (what `minicluster up --detach` waits for); then `flux run true`
is timed two ways: through the backend's exec (`minicluster exec`: on podman a `podman exec` per run), and
inside the lead pod (a loop of runs in one exec, so the exec's own cost is left out); then `down` is timed.
Also the size of the broker bundle a pod's init container copies (the broker image's own command, run into a
scratch directory: its apparent size in MB). Needs root, podman and the images `make images` builds (others with
MINICLUSTERS_REGISTRY / MINICLUSTERS_TAG). Figures depend on load: the machine's load average is printed beside
them. Issue 45's keys: `up_s` (podman) <= 2 x `local_up_s` in the same run (`up_ratio`), `down_s` <= 5,
`bundle_mb` <= 60.

    .venv/bin/python bench/bench_podman.py [--runs 10] [--backends local,podman] [--record]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

from miniclusters.api import load_minicluster
from miniclusters.backends import get_backend
from miniclusters.backends.base import Backend, CreateOptions
from miniclusters.render import RenderOptions

IN_POD_LOOP = (
    "n=$0; i=0; while [ $i -lt $n ]; do s=$(date +%s%N); flux run true || exit 1; e=$(date +%s%N); "
    "echo $(( (e - s) / 1000 )); i=$((i + 1)); done"
)


def spec(name: str) -> dict:
    options = RenderOptions()
    return {
        "apiVersion": "miniclusters.dev/v1alpha1",
        "kind": "MiniCluster",
        "metadata": {"name": name},
        "spec": {
            "size": 4,
            "interactive": True,
            "containers": [{"image": f"{options.registry}/openmpi-openfoam:{options.tag}"}],
        },
    }


def measure(backend: Backend, runs: int) -> dict[str, float]:
    name = f"bench-{backend.name}-{uuid.uuid4().hex[:6]}"
    mc = load_minicluster(spec(name))
    started = time.perf_counter()
    status = backend.create(mc, CreateOptions(timeout=600))
    up_s = time.perf_counter() - started
    try:
        if status.ranks_up != (0, 1, 2, 3):
            raise SystemExit(f"{backend.name}: brokers did not all join: {status.ranks_up}")
        via_exec = []
        for _ in range(runs + 1):
            begun = time.perf_counter()
            result = backend.exec(name, 0, ["flux", "run", "true"])
            via_exec.append(time.perf_counter() - begun)
            if result.rc != 0:
                raise SystemExit(f"{backend.name}: flux run true failed: {result.stderr}")
        loop = backend.exec(name, 0, ["sh", "-c", IN_POD_LOOP, str(runs + 1)])
        if loop.rc != 0:
            raise SystemExit(f"{backend.name}: in-pod loop failed: {loop.stderr}")
        in_pod = [int(line) / 1e6 for line in loop.stdout.split()]
    finally:
        begun = time.perf_counter()
        backend.delete(name)
        down_s = time.perf_counter() - begun
    return {
        "up_4_pods_s": up_s,
        "run_true_exec_ms": statistics.median(via_exec[1:]) * 1000,
        "run_true_in_pod_ms": statistics.median(in_pod[1:]) * 1000,
        "down_s": down_s,
    }


ROWS = [
    ("up_4_pods_s", "up: 4 pods, every broker joined (s)"),
    ("run_true_in_pod_ms", "`flux run true` in the lead pod, median (ms)"),
    ("run_true_exec_ms", "`flux run true` through exec, median (ms)"),
    ("down_s", "down (s)"),
]


COPY_SIZE = "/opt/miniclusters/install.sh /tmp/bundle >/dev/null && du -sb /tmp/bundle"


def bundle_mb() -> float:
    """The apparent size (MB) of what the broker image's init-container command copies into a pod's volume."""
    conf = Path(__file__).resolve().parents[1] / "images" / "containers.conf"
    env = {**os.environ, "CONTAINERS_CONF": os.environ.get("CONTAINERS_CONF", str(conf))}
    image = RenderOptions().broker_image
    argv = ["podman", "run", "--rm", "--entrypoint", "/bin/sh", image, "-c", COPY_SIZE]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"measuring the bundle of {image} failed: {done.stderr.strip()}")
    return round(int(done.stdout.split()[0]) / 1e6, 1)


def headline(results: dict[str, dict[str, float]], bundle: float | None) -> dict[str, float | None]:
    """Issue 45's keys: podman's up and down, the local backend's up in the same run, their ratio, the bundle."""
    podman, local = results.get("podman"), results.get("local")
    up = podman["up_4_pods_s"] if podman else None
    local_up = local["up_4_pods_s"] if local else None
    return {
        "up_s": round(up, 2) if up is not None else None,
        "local_up_s": round(local_up, 2) if local_up is not None else None,
        "up_ratio": round(up / local_up, 2) if up is not None and local_up else None,
        "down_s": round(podman["down_s"], 2) if podman else None,
        "bundle_mb": bundle,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--backends", default="local,podman")
    parser.add_argument("--record", action="store_true", help="write the JSON line into bench/results.toml")
    args = parser.parse_args()
    names = args.backends.split(",")
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-podman-", dir="/tmp") as state:
        os.environ["MINICLUSTERS_STATE_DIR"] = str(Path(state))
        for name in names:
            print(f"measuring the {name} backend ...", flush=True)
            results[name] = measure(get_backend(name), args.runs)
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} (figures rise with load)")
    print(f"{'measure':<46}" + "".join(f"{n:>10}" for n in names))
    for key, label in ROWS:
        print(f"{label:<46}" + "".join(f"{results[n][key]:>10.3f}" for n in names))
    bundle = bundle_mb() if "podman" in names else None
    keys = headline(results, bundle)
    print(f"broker bundle a pod's init container copies: {bundle} MB; podman up / local up: {keys['up_ratio']}")
    line = {"bench": "podman", **keys, "backends": results, "load_average": round(os.getloadavg()[0], 1)}
    print(json.dumps(line))
    if args.record:
        from docsgen.benchmarks import record_result

        record_result("podman", line)


if __name__ == "__main__":
    main()
