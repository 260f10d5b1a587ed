"""Exclusive CPUs on the local backend: each pod pinned to its own cores by a cpuset cgroup, refused when none
are left, and the cpusets removed with the cluster."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from common import idset
from miniclusters.backends.local import cpusets


def parse_cpu_list(text: str) -> tuple[int, ...]:
    return tuple(idset.decode(text))


def _spec(directory: Path, name: str, size: int, tasks: int) -> Path:
    data = {
        "apiVersion": "miniclusters.dev/v1alpha1",
        "kind": "MiniCluster",
        "metadata": {"name": name},
        "spec": {
            "size": size,
            "tasks": tasks,
            "interactive": True,
            "placement": {"cpus": "exclusive"},
            "containers": [{"image": "local", "resources": {"requests": {"memory": "256Mi"}}}],
        },
    }
    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _allowed(pid: int) -> tuple[int, ...]:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return parse_cpu_list(line.split(":", 1)[1])
    raise AssertionError(f"no Cpus_allowed_list for {pid}")


@pytest.mark.needs_root
def test_exclusive_pods_run_only_on_their_own_cores(
    mc: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    driver = cpusets.detect()
    missing = None
    if driver is None:
        missing = "no writable cpuset cgroup on this machine"
    elif len(set(driver.machine_cpus()) - driver.taken()) < 2:
        missing = "fewer than two free cores for two pinned pods"
    if missing and os.environ.get("CI"):
        pytest.fail(f"{missing}: CI runs as root on a machine with a cpuset cgroup and 2 cores")
    if missing:
        pytest.skip(missing)
    assert driver is not None
    up = mc("up", str(_spec(tmp_path, "pinned", size=2, tasks=2)), "--detach", timeout=120)
    assert up.returncode == 0, up.stderr
    cores = [driver.cpus_of("pinned", index) for index in (0, 1)]
    assert all(c is not None and len(c) == 1 for c in cores), cores
    assert set(cores[0] or ()).isdisjoint(cores[1] or ())
    for index in (0, 1):  # every process of the pod, broker included, may run only on the pod's core
        pids = [int(p) for p in driver.procs_file("pinned", index).read_text().split()]
        assert pids
        assert {_allowed(pid) for pid in pids} == {cores[index]}
    # a command run in a pod runs on its cores too
    inside = mc("exec", "pinned", "--index", "1", "--", "grep", "Cpus_allowed_list", "/proc/self/status")
    assert inside.returncode == 0, inside.stderr
    assert parse_cpu_list(inside.stdout.split(":", 1)[1]) == cores[1]
    # an MPI-style job's ranks inherit their pod's cores
    ran = mc("exec", "pinned", "--", "flux", "run", "-N", "2", "-n", "2", "sh", "-c",
             "echo $(hostname) $(grep Cpus_allowed_list /proc/self/status | cut -f2)")  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    seen = dict(line.split() for line in ran.stdout.splitlines() if line.startswith("pinned-"))
    assert {host: parse_cpu_list(cpus) for host, cpus in seen.items()} == {"pinned-0": cores[0], "pinned-1": cores[1]}

    # nothing shares a pinned core: an exclusive cluster asking for more than is free is refused, naming the field
    free = len(set(driver.machine_cpus()) - driver.taken())
    refused = mc("up", str(_spec(tmp_path, "pinned2", size=1, tasks=free + 1)), "--detach", timeout=60)
    assert refused.returncode == 2
    assert "spec.placement.cpus" in refused.stderr and f"only {free} free" in refused.stderr
    assert not driver.cluster_dir("pinned2").exists()

    assert mc("down", "pinned", timeout=60).returncode == 0
    assert not driver.cluster_dir("pinned").exists()


@pytest.mark.needs_root
def test_a_placement_policy_shapes_the_local_cluster(
    mc: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    """network + scale: the job's ranks stay in one pod however many nodes it may use; granularity: a pod each."""
    for name, profile, policy, pods in (("placenet", "network", "scale", 1), ("placegran", "cpu", "granularity", 2)):
        path = _spec(tmp_path, name, size=2, tasks=2)
        data = yaml.safe_load(path.read_text())
        data["spec"]["placement"] = {"profile": profile, "policy": policy}
        data["spec"]["containers"][0]["resources"] = {}
        path.write_text(yaml.safe_dump(data))
        up = mc("up", str(path), "--detach", timeout=120)
        assert up.returncode == 0, up.stderr
        try:
            ran = mc("exec", name, "--", "flux", "run", "-N", str(pods), "-n", "2", "hostname")
            assert ran.returncode == 0, ran.stderr
            assert sorted(set(ran.stdout.split())) == [f"{name}-{i}" for i in range(pods)]
            beyond = mc("exec", name, "--", "flux", "run", "-N", str(pods + 1), "-n", "2", "hostname")
            assert beyond.returncode != 0 and "unsatisfiable" in beyond.stderr  # no more pods than the shape
        finally:
            assert mc("down", name, timeout=60).returncode == 0


@pytest.mark.needs_root
def test_ranks_of_an_exclusive_pod_each_get_a_core_of_its_own(
    mc: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    """Two ranks in one exclusive 2-core pod: its broker defaults to cpu-affinity=per-task, so each task and each
    Open MPI rank (forked by mpirun, not by the broker) runs on one core of the pod's, not on both."""
    driver = cpusets.detect()
    free = len(set(driver.machine_cpus()) - driver.taken()) if driver else 0
    if free < 2:
        if os.environ.get("CI"):
            pytest.fail("CI runs as root on a machine with a cpuset cgroup and 2 free cores")
        pytest.skip("needs a cpuset cgroup and two free cores")
    up = mc("up", str(_spec(tmp_path, "pinpair", size=1, tasks=2)), "--detach", timeout=120)
    assert up.returncode == 0, up.stderr
    try:
        cores = driver.cpus_of("pinpair", 0) if driver else None
        assert cores is not None and len(cores) == 2
        show = "echo $(grep Cpus_allowed_list /proc/self/status | cut -f2)"
        for launch in ([], ["-o", "mpi=openmpi"]):
            ran = mc("exec", "pinpair", "--", "flux", "run", "-n", "2", *launch, "sh", "-c", show)
            assert ran.returncode == 0, ran.stderr
            assert sorted(parse_cpu_list(line) for line in ran.stdout.split()) == [(c,) for c in cores], launch
        # the job's own option wins over the pod's default
        ran = mc("exec", "pinpair", "--", "flux", "run", "-n", "2", "-o", "cpu-affinity=on", "sh", "-c", show)
        assert [parse_cpu_list(line) for line in ran.stdout.split()] == [cores, cores]
    finally:
        assert mc("down", "pinpair", timeout=60).returncode == 0
