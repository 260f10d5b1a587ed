"""Real Kubernetes beside the local and podman backends, the same MiniCluster on each (one JSON line per backend).

For each backend: `up_s`, an interactive 4-pod MiniCluster (builtin flavour, the openmpi-openfoam image) from
`create` until every broker joined; `first_flux_run_ms`, the first `flux run true` through the backend's exec;
`scale_2_to_4_s`, after a scale down to 2, growing to 4 until ranks 0-3 have joined again; `resize_ms`, pod 1's
CPU request changed in place to 250m, from the call until the container's own cgroup shows `cpu.shares` 256
(read through exec, each look costing one exec); `down_s`, from delete until the cluster is gone (on
Kubernetes: the MiniCluster object, deleted in the foreground, with its pods). For Kubernetes also `kube_up_s`:
`minicluster kube up` from nothing to the node Ready (the cluster is taken down first, and left down at the end
unless it was up).

Needs root, `make kube` and `make images`. Figures depend on load: each line carries the load average.

    .venv/bin/python bench/bench_kube.py [--backends kubernetes,local,podman]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from miniclusters.api import load_minicluster
from miniclusters.backends import get_backend
from miniclusters.backends.base import Backend, CreateOptions
from miniclusters.render import RenderOptions

CPU_SHARES = (
    "p=$(grep -E ':cpu(,|:)' /proc/self/cgroup | head -n1 | cut -d: -f3); f=/sys/fs/cgroup/cpu$p/cpu.shares; "
    '[ -f "$f" ] || f=/sys/fs/cgroup/cpu/cpu.shares; cat "$f"'
)
MINICLUSTER = str(Path(sys.executable).parent / "minicluster")


def spec(name: str) -> dict:
    options = RenderOptions()
    return {
        "apiVersion": "miniclusters.dev/v1alpha1",
        "kind": "MiniCluster",
        "metadata": {"name": name},
        "spec": {
            "size": 4,
            "maxSize": 4,
            "interactive": True,
            "containers": [
                {
                    "image": f"{options.registry}/openmpi-openfoam:{options.tag}",
                    "resources": {"requests": {"cpu": "100m"}},
                }
            ],
        },
    }


def _joined(backend: Backend, name: str, size: int, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if backend.status(name).ranks_up == tuple(range(size)):
            return
        time.sleep(0.2)
    raise SystemExit(f"{backend.name}: ranks 0-{size - 1} did not join within {timeout:.0f}s")


def _gone(backend: Backend, name: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if name not in {c.name for c in backend.list()}:  # not status(): it would ask the dying lead
            return
        time.sleep(0.1)
    raise SystemExit(f"{backend.name}: {name} still there {timeout:.0f}s after delete")


def measure(backend: Backend) -> dict[str, float]:
    name = f"bk-{backend.name[:4]}-{uuid.uuid4().hex[:5]}"
    mc = load_minicluster(spec(name))
    began = time.perf_counter()
    status = backend.create(mc, CreateOptions(timeout=600))
    up_s = time.perf_counter() - began
    try:
        if status.ranks_up != (0, 1, 2, 3):
            _joined(backend, name, 4)
        began = time.perf_counter()
        run = backend.exec(name, 0, ["flux", "run", "true"])
        first_run_ms = (time.perf_counter() - began) * 1000
        if run.rc != 0:
            raise SystemExit(f"{backend.name}: flux run true failed: {run.stderr}")
        backend.scale(name, 2)
        _joined(backend, name, 2)
        began = time.perf_counter()
        backend.scale(name, 4)
        _joined(backend, name, 4)
        scale_s = time.perf_counter() - began
        began = time.perf_counter()
        backend.resize(name, 1, "250m")
        while backend.exec(name, 1, ["sh", "-c", CPU_SHARES]).stdout.strip() != "256":
            if time.perf_counter() - began > 120:
                raise SystemExit(f"{backend.name}: pod 1's cpu.shares never became 256")
        resize_ms = (time.perf_counter() - began) * 1000
    finally:
        began = time.perf_counter()
        backend.delete(name)
        _gone(backend, name)  # Kubernetes deletes in the background: down ends when the object and its pods have
        down_s = time.perf_counter() - began
    return {
        "up_s": round(up_s, 2),
        "first_flux_run_ms": round(first_run_ms, 1),
        "scale_2_to_4_s": round(scale_s, 2),
        "resize_ms": round(resize_ms, 1),
        "down_s": round(down_s, 2),
    }


def kube_up_seconds() -> tuple[float, str]:
    subprocess.run([MINICLUSTER, "kube", "down"], check=True, capture_output=True)
    began = time.perf_counter()
    up = subprocess.run([MINICLUSTER, "kube", "up"], check=True, capture_output=True, text=True)
    return time.perf_counter() - began, up.stdout.strip()


def install_crd() -> None:
    """`minicluster crd | kubectl apply --server-side -f -`, through the API."""
    from miniclusters.api.crd import build_crd
    from miniclusters.backends.kubernetes.client import RealKubeApi

    RealKubeApi.from_kubeconfig(None, "default").apply(build_crd(), field_manager="miniclusters-bench", force=True)


GC_DISCOVERY_S = 35.0
"""The garbage collector finds a newly installed CRD's kind at its next discovery refresh (every 30 s): until then
a foreground delete of a MiniCluster waits for it (measured: down_s 22 s one second after the CRD, 1.9 s later)."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", default="kubernetes,local,podman")
    parser.add_argument("--record", action="store_true", help="write the kubernetes JSON line into bench/results.toml")
    args = parser.parse_args()
    names = args.backends.split(",")
    extra: dict[str, dict[str, float]] = {}
    crd_since = 0.0
    if "kubernetes" in names:  # the cluster from nothing first; measured last, once its GC knows our CRD
        print("bringing the cluster up from nothing ...", file=sys.stderr, flush=True)
        seconds, kubeconfig = kube_up_seconds()
        os.environ["KUBECONFIG"] = kubeconfig
        install_crd()
        crd_since = time.monotonic()
        extra["kubernetes"] = {"kube_up_s": round(seconds, 2)}
        names = [n for n in names if n != "kubernetes"] + ["kubernetes"]
    with tempfile.TemporaryDirectory(prefix="bench-kube-", dir="/tmp") as state:
        os.environ["MINICLUSTERS_STATE_DIR"] = state
        for name in names:
            if name == "kubernetes":
                time.sleep(max(0.0, crd_since + GC_DISCOVERY_S - time.monotonic()))
            print(f"measuring the {name} backend ...", file=sys.stderr, flush=True)
            figures = measure(get_backend(name))
            line = {"backend": name, **figures, **extra.get(name, {}), "load_average": round(os.getloadavg()[0], 2)}
            print(json.dumps(line), flush=True)
            if args.record and name == "kubernetes":
                from docsgen.benchmarks import record_result

                record_result("kube", line)


if __name__ == "__main__":
    main()
