"""What a user types, on the real cluster: `minicluster up examples/hello.yaml --backend kubernetes` runs MPI across
four real pods that find each other by the headless Service's DNS names, in both flavours; `scale` goes through
the MiniCluster's `/scale` subresource and the Indexed Job; `resize` changes a running container's cgroup in place
(same container, same processes, 0 restarts); `down` leaves no object and no container."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import yaml

from miniclusters.kube_shapes import Pod
from miniclusters.testing.kube_e2e import ROOT, cli, containers_of, kubectl_json, objects_of, pod_of, wait_until

FLUX_VIEW = "ghcr.io/miniclusters/miniclusters-flux-view:0.1.0"


def _hello(tmp_path: Path, name: str, flavour: str) -> Path:
    spec = yaml.safe_load((ROOT / "examples" / "hello.yaml").read_text())
    spec["metadata"]["name"] = name
    if flavour == "flux":  # our flux-core 0.88 view (make images), not the Flux Operator's registry image
        spec["spec"]["flux"] = {"flavour": "flux", "container": {"image": FLUX_VIEW}}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_hello_runs_mpi_across_four_real_pods_in_both_flavours(
    kubeconfig: Path, e2e_namespace: str, tmp_path: Path
) -> None:
    for flavour in ("builtin", "flux"):
        name = f"hello-{flavour[:4]}-{uuid.uuid4().hex[:4]}"
        spec = _hello(tmp_path, name, flavour)
        up = cli("up", str(spec), "--backend", "kubernetes", "--namespace", e2e_namespace)
        try:
            assert up.returncode == 0, up.stdout + up.stderr
            ranks = re.findall(r"hello from rank (\d) of 4 on (\S+)", up.stdout)
            assert sorted(ranks) == [(str(i), f"{name}-{i}") for i in range(4)], up.stdout
        finally:
            down = cli("down", name, "--backend", "kubernetes", "--namespace", e2e_namespace)
        assert down.returncode == 0, down.stderr

        def none_left(of: str = name) -> bool:
            return not objects_of(kubeconfig, e2e_namespace, of)

        wait_until("no object of the cluster left", none_left)
        wait_until("no container of its pods still running in containerd", lambda: not containers_of(e2e_namespace))


def test_scale_and_resize_in_place_on_an_interactive_cluster(
    kubeconfig: Path, e2e_namespace: str, tmp_path: Path
) -> None:
    name = f"inter-{uuid.uuid4().hex[:4]}"
    spec = {
        "apiVersion": "miniclusters.dev/v1alpha1",
        "kind": "MiniCluster",
        "metadata": {"name": name},
        "spec": {
            "size": 2,
            "maxSize": 4,
            "interactive": True,
            "containers": [
                {"image": "ghcr.io/miniclusters/openmpi-openfoam:0.1.0", "resources": {"requests": {"cpu": "100m"}}}
            ],
        },
    }
    path = tmp_path / "interactive.yaml"
    path.write_text(yaml.safe_dump(spec))
    ns = ["--backend", "kubernetes", "--namespace", e2e_namespace]
    up = cli("up", str(path), *ns)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        lead_uid = pod_of(kubeconfig, e2e_namespace, name, 0)["metadata"]["uid"]

        # scale 2 -> 4 -> 2 through the MiniCluster's /scale subresource and the Indexed Job
        for size in (4, 2):
            scaled = cli("scale", name, str(size), *ns)
            assert scaled.returncode == 0, scaled.stderr
            scale = kubectl_json(kubeconfig, "get", f"miniclusters/{name}", "-n", e2e_namespace, "--subresource=scale")
            assert scale["spec"]["replicas"] == size
            job = kubectl_json(kubeconfig, "get", f"jobs/{name}", "-n", e2e_namespace)
            assert job["spec"]["parallelism"] == size

            def joined(size: int = size) -> bool:
                status = cli("status", name, *ns, "-o", "json", timeout=120)
                ranks = json.loads(status.stdout).get("ranks_up") if status.returncode == 0 else None
                return ranks == list(range(size))

            wait_until(f"ranks 0-{size - 1} joined", joined, timeout=180)
        assert pod_of(kubeconfig, e2e_namespace, name, 0)["metadata"]["uid"] == lead_uid  # the lead stays

        # resize pod 1 in place: the container's cpu.shares change, same container, same process, 0 restarts
        before = pod_of(kubeconfig, e2e_namespace, name, 1)
        container_id = before["status"]["containerStatuses"][0]["containerID"]
        started = ("sh", "-c", "cut -d' ' -f22 /proc/1/stat")  # when the container's first process started
        start_pid = cli("exec", name, "-i", "1", *ns, "--", *started).stdout
        resized = cli("resize", name, "1", "--cpu", "250m", *ns)
        assert resized.returncode == 0, resized.stdout + resized.stderr
        shares = cli("exec", name, "-i", "1", *ns, "--", "cat", "/sys/fs/cgroup/cpu/cpu.shares")
        assert shares.stdout.strip() == "256", shares.stdout + shares.stderr
        after = pod_of(kubeconfig, e2e_namespace, name, 1)
        status = after["status"]["containerStatuses"][0]
        assert status["containerID"] == container_id and status["restartCount"] == 0
        assert status["resources"]["requests"]["cpu"] == "250m"
        assert cli("exec", name, "-i", "1", *ns, "--", *started).stdout == start_pid

        # more than the node holds: refused (infeasible) by the apiserver, the pod keeps its CPU
        refused = cli("resize", name, "1", "--cpu", "64", *ns)
        assert refused.returncode != 0 and "infeasible" in (refused.stdout + refused.stderr).lower()
        assert (
            pod_of(kubeconfig, e2e_namespace, name, 1)["status"]["containerStatuses"][0]["resources"]
            == status["resources"]
        )

        # more than is free on the node now, but within it: the kubelet defers it (PodResizePending, Deferred),
        # `resize` says so and exits 1, the pod keeps its CPU; once pod 0 gives CPU back the kubelet applies it
        want = _free_millicores(kubeconfig) + 250 + 50  # pod 1's 250m plus 50m more than is free
        deferred = cli("resize", name, "1", "--cpu", f"{want}m", *ns)
        assert deferred.returncode == 1 and "deferred" in deferred.stdout.lower(), deferred.stdout + deferred.stderr
        pending = pod_of(kubeconfig, e2e_namespace, name, 1)
        assert _condition_reason(pending, "PodResizePending") == "Deferred", pending["status"]
        assert pending["status"]["containerStatuses"][0]["resources"]["requests"]["cpu"] == "250m"
        freed = cli("resize", name, "0", "--cpu", "10m", *ns)
        assert freed.returncode == 0, freed.stdout + freed.stderr

        def applied() -> bool:
            status = pod_of(kubeconfig, e2e_namespace, name, 1)["status"]
            return status["containerStatuses"][0]["resources"]["requests"]["cpu"] == f"{want}m"

        wait_until("the kubelet applied the deferred resize once pod 0 shrank", applied, timeout=120, interval=2)
        shares = cli("exec", name, "-i", "1", *ns, "--", "cat", "/sys/fs/cgroup/cpu/cpu.shares")
        assert shares.stdout.strip() == str(want * 1024 // 1000), shares.stdout + shares.stderr
        final = pod_of(kubeconfig, e2e_namespace, name, 1)["status"]["containerStatuses"][0]
        assert final["containerID"] == container_id and final["restartCount"] == 0
    finally:
        cli("down", name, *ns)
    wait_until("no object of the cluster left", lambda: not objects_of(kubeconfig, e2e_namespace, name))


def _condition_reason(pod: Pod, kind: str) -> str | None:
    return next((c.get("reason") for c in pod["status"].get("conditions", []) if c["type"] == kind), None)


def _free_millicores(kubeconfig: Path) -> int:
    """The node's allocatable CPU less the requests of every active pod bound to it (what a resize is admitted
    against)."""
    from elasticity.model.resources import cpu_millicores

    node = kubectl_json(kubeconfig, "get", "nodes")["items"][0]
    pods = kubectl_json(kubeconfig, "get", "pods", "-A")["items"]
    used = sum(
        cpu_millicores(container.get("resources", {}).get("requests", {}).get("cpu", "0"))
        for pod in pods
        if pod["spec"].get("nodeName") and pod["status"].get("phase") in ("Pending", "Running")
        for container in pod["spec"]["containers"]
    )
    return cpu_millicores(node["status"]["allocatable"]["cpu"]) - used


def test_flux_flavour_commands_exec_d_into_the_lead_run_flux_cores_python_commands_and_jobs_yield(
    kubeconfig: Path, e2e_namespace: str, tmp_path: Path
) -> None:
    """`minicluster exec NAME -- flux run ...` in an interactive `flux`-flavour cluster: flux-core's Python
    commands are found (the view's python3 first on PATH: without it "`run' is not a flux command"), the job's
    tasks keep the image's PATH after the view's, and they carry the yield that pods sharing a node's cores need
    (render/shared_cores.py)."""
    name = f"fyield-{uuid.uuid4().hex[:4]}"
    spec = yaml.safe_load(_hello(tmp_path, name, "flux").read_text())
    spec["spec"].update(size=2, interactive=True)
    spec["spec"]["containers"][0].pop("command", None)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec))
    ns = ["--backend", "kubernetes", "--namespace", e2e_namespace]
    up = cli("up", str(path), *ns)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        listed = cli("exec", name, *ns, "--", "flux", "resource", "list", "-no", "{state} {nnodes}")
        assert listed.returncode == 0 and "free 2" in listed.stdout, listed.stdout + listed.stderr
        script = 'echo "$OMPI_MCA_mpi_yield_when_idle $PATH"'
        ran = cli("exec", name, *ns, "--", "flux", "run", "-N2", "-n2", "sh", "-c", script)
        assert ran.returncode == 0, ran.stdout + ran.stderr
        view = "/mnt/flux/view/bin"
        image_path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        assert ran.stdout.splitlines() == [f"1 {view}:{image_path}"] * 2, ran.stdout
    finally:
        cli("down", name, *ns)
    wait_until("no object of the cluster left", lambda: not objects_of(kubeconfig, e2e_namespace, name))
