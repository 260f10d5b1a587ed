"""What the end-to-end tests (tests/e2e) do on a real cluster, shared between their files: run our CLI and
kubectl, wait for a condition, and find what a cluster left behind (objects in the API server, containers in
the containerd of `minicluster kube up`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from miniclusters.kube_shapes import Pod

ROOT = Path(__file__).resolve().parents[2]
MINICLUSTER = [str(Path(sys.executable).parent / "minicluster")]


def cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """`minicluster ARGS` as a user runs it (KUBECONFIG from this process's environment)."""
    return subprocess.run(
        [*MINICLUSTER, *args], capture_output=True, text=True, timeout=timeout, env=os.environ.copy(), check=False
    )


def kubectl(kubeconfig: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """`kubectl ARGS` (the one `minicluster kube up` built) as a user runs it; never raises on its exit code."""
    from miniclusters.localkube.layout import Layout

    return subprocess.run(
        [str(Layout().binary("kubectl")), "--kubeconfig", str(kubeconfig), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def kubectl_json(kubeconfig: Path, *args: str) -> Any:
    from miniclusters.localkube.layout import Layout

    done = subprocess.run(
        [str(Layout().binary("kubectl")), "--kubeconfig", str(kubeconfig), *args, "-o", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(done.stdout)


def wait_until(what: str, check: Callable[[], Any], timeout: float = 120, interval: float = 1.0) -> Any:
    """``check()``'s first truthy value; an AssertionError naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"not within {timeout:.0f}s: {what}")


def containers_of(namespace: str) -> list[str]:
    """Containers of the namespace's pods that containerd has not seen exit (the cluster of `minicluster kube up`).

    Exited ones are left out: they hold no process and no CPU, and the kubelet removes them only at its next
    container garbage collection, once a minute, which a test waiting for them would wait out for nothing.
    """
    from miniclusters.localkube.layout import Layout

    layout = Layout()
    listed = subprocess.run(
        [
            str(layout.binary("crictl")),
            "--runtime-endpoint",
            f"unix://{layout.containerd_socket}",
            "ps",
            "-a",
            "-o",
            "json",
            "--label",
            f"io.kubernetes.pod.namespace={namespace}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if listed.returncode != 0:
        return [f"crictl failed: {listed.stderr.strip()}"]
    containers = json.loads(listed.stdout).get("containers", [])
    return [str(c["id"]) for c in containers if c.get("state") != "CONTAINER_EXITED"]


def objects_of(kubeconfig: Path, namespace: str, name: str) -> list[str]:
    """Objects of MiniCluster ``name`` still in the API server (by our label, or by a name it gave them)."""
    kinds = "miniclusters,jobs,pods,services,configmaps,secrets"
    listed = kubectl_json(kubeconfig, "get", kinds, "-n", namespace, "-l", f"app.kubernetes.io/instance={name}")
    named = kubectl_json(kubeconfig, "get", kinds, "-n", namespace)
    return sorted(
        {f"{o['kind']}/{o['metadata']['name']}" for o in listed["items"]}
        | {f"{o['kind']}/{o['metadata']['name']}" for o in named["items"] if o["metadata"]["name"].startswith(name)}
    )


def pod_of(kubeconfig: Path, namespace: str, name: str, index: int) -> Pod:
    """The one pod of MiniCluster ``name`` with completion index ``index``."""
    pods = kubectl_json(
        kubeconfig, "get", "pods", "-n", namespace, "-l", f"batch.kubernetes.io/job-completion-index={index}"
    )
    found = [p for p in pods["items"] if p["metadata"]["name"].startswith(f"{name}-{index}-")]
    assert len(found) == 1 and isinstance(found[0], dict), [p["metadata"]["name"] for p in pods["items"]]
    pod = cast(Pod, found[0])  # kubectl's JSON of a pod
    return pod


def apply_crd() -> None:
    """Our CRD applied (server-side, as `minicluster crd | kubectl apply --server-side -f -`) and Established, on
    the cluster KUBECONFIG names: the e2e suite's start, and its restoration after a test that uninstalls it."""
    from miniclusters.api.crd import CRD_NAME, build_crd
    from miniclusters.backends.kubernetes.api import CRD
    from miniclusters.backends.kubernetes.client import RealKubeApi

    api = RealKubeApi.from_kubeconfig(None, "default")
    api.apply(build_crd(), field_manager="miniclusters-e2e", force=True)

    def established() -> bool:
        crd = api.get(CRD, None, CRD_NAME)
        conditions = (crd.get("status") or {}).get("conditions") or []
        return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)

    wait_until("the MiniCluster CRD is Established", established, timeout=60, interval=0.5)


def doc_block(page: str, test_file: str) -> str:
    """The shell block of `page` (relative to the repository root) whose marker names `test_file` as the test
    that runs it on the real cluster."""
    from docsgen.shell_blocks import shell_blocks

    (block,) = [b for b in shell_blocks(ROOT / page, page) if Path(test_file).name in b.reason]
    return block.script


def user_env() -> dict[str, str]:
    """A user's shell after `source .venv/bin/activate`, with the kubectl `make kube` built on PATH and no
    backend chosen (KUBECONFIG from this process's environment)."""
    from miniclusters.localkube.layout import Layout

    env = {k: v for k, v in os.environ.items() if not k.startswith("MINICLUSTER_")}
    paths = [str(Path(sys.executable).parent), str(Layout().binary("kubectl").parent), env.get("PATH", os.defpath)]
    env["PATH"] = os.pathsep.join(paths)
    return env


def run_as_written(script: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """A documentation block run as written from the repository root, stopping at its first failing command."""
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=ROOT,
        env=user_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
