"""`minicluster multiplex` on the local backend for real: the proxy solver, real cgroups, resizes in place."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from elasticity.control.events import read_events
from elasticity.workloads.proxy import build_proxy_solver
from miniclusters.backends.local import cgroups
from miniclusters.backends.local.cgroups import CgroupDriver
from miniclusters.backends.local.job_cgroups import LocalJobShares
from miniclusters.testing.pod_processes import broker_of
from tests.waiting import wait_until

pytestmark = pytest.mark.needs_root


def _spec(directory: Path, name: str, iterations: int) -> Path:
    data = {
        "apiVersion": "miniclusters.dev/v1alpha1",
        "kind": "MiniCluster",
        "metadata": {"name": name},
        "spec": {
            "size": 2,
            "tasks": 4,
            "interactive": True,
            "containers": [{"image": "local", "resources": {"requests": {"cpu": "1"}}}],
            "multiplexing": {"enabled": True, "command": f"proxy_solver {iterations} 2048 32 1,1,1,20", "max": 2},
        },
    }
    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_multiplex_packs_two_simulations_in_place_with_no_restarts(mc, machine: Any, tmp_path: Path) -> None:
    """As examples/multiplex.yaml runs: 500 us of added latency each way between the pods (netem or NFQUEUE)."""
    build_proxy_solver()
    up = mc("up", str(_spec(tmp_path, "mux", 4000)), "--detach", "--latency", "500us")
    assert up.returncode == 0, up.stderr
    status = json.loads(mc("status", "mux", "-o", "json").stdout)
    assert any(c["type"] == "NetworkEmulation" for c in status["conditions"])
    timeline = tmp_path / "mux.png"
    result = mc(
        "multiplex", "mux", "--json", "--timeline", str(timeline), "--workdir", str(tmp_path / "work"),
        "--settle", "1", "--interval", "0.5", "--timeout", "240", timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert [s["state"] for s in summary["simulations"]] == ["done", "done"]
    assert all(s["mean_duty"] is not None and s["mean_duty"] < 0.5 for s in summary["simulations"])
    assert summary["restarts"] == 0 and summary["same_pids"] is True
    assert summary["resizes"] >= 2
    events = list(read_events(timeline.with_suffix(".jsonl")))
    kinds = [e["kind"] for e in events]
    assert kinds.count("profiled") == 2 and kinds.count("done") == 2
    # the second simulation ran beside the first: packed, not queued behind it
    first_end = min(e["t"] for e in events if e["kind"] == "done")
    second_start = [e["t"] for e in events if e["kind"] == "running" and e["sim"] == "sim2"]
    assert second_start and second_start[0] < first_end
    # every resize was answered in place; job cgroups got weights following need
    answers = [e for e in events if e["kind"] == "resize-answer"]
    assert answers and all(e["answer"] == "done" for e in answers)
    shares = [e for e in events if e["kind"] == "job-shares" and "sim2" in e["detail"]]
    assert shares and all(e["applied"] for e in shares)
    assert timeline.read_bytes()[:4] == b"\x89PNG"
    # same brokers as before the controller ran (in-place resizes never restart a pod)
    after = json.loads(mc("status", "mux", "-o", "json").stdout)
    assert after["multiplexing"]["phase"] == "done" and after["multiplexing"]["restarts"] == 0
    assert [p["phase"] for p in after["pods"]] == [p["phase"] for p in status["pods"]] == ["Running", "Running"]


def test_bad_multiplex_input_exits_2(mc, machine: Any, tmp_path: Path) -> None:
    up = mc("up", str(_spec(tmp_path, "muxbad", 100)), "--detach")
    assert up.returncode == 0, up.stderr
    assert "multiplexing controller" not in up.stdout, "--detach leaves the controller to `minicluster multiplex`"
    result = mc("multiplex", "muxbad", "--max", "3", "--total", "2")
    assert result.returncode == 2 and "--total" in result.stderr
    result = mc("multiplex", "muxbad", "--equal-cpu", "lots")
    assert result.returncode == 2 and "lots" in result.stderr
    assert mc("multiplex", "nosuch", "--command", "x").returncode == 1


def test_job_cgroups_weight_each_simulation_in_a_real_pod_cgroup(tmp_path: Path) -> None:
    driver = cgroups.detect()
    assert driver is not None, "CI runs as root with a writable cpu controller"
    cluster = f"muxcg{os.getpid()}"
    driver.create(cluster, 0, 1000)
    sleeper = __import__("subprocess").Popen(["sleep", "30"])
    try:
        shares = LocalJobShares(driver, cluster, lambda sim: {0: [sleeper.pid]} if sim == "a" else {})
        (result,) = shares.set_shares({0: {"a": 750, "b": 250}})
        assert result.applied, result.detail
        assert shares.weights(0) == {"a": driver.weight_for(750), "b": driver.weight_for(250)}
        procs = (driver.pod_dir(cluster, 0) / "job-a" / "cgroup.procs").read_text().split()
        assert str(sleeper.pid) in procs
        # the pod's own processes sit in a leaf weighted by the overhead, not as 1024-weight peers of the jobs
        assert (driver.pod_dir(cluster, 0) / "pod" / driver.knob).read_text().strip() == str(driver.weight_for(100))
        # b left the pod: its (empty) cgroup goes; a's stays while its process runs
        shares.set_shares({0: {"a": 900}})
        assert shares.weights(0) == {"a": driver.weight_for(900)}
    finally:
        sleeper.kill()
        sleeper.wait()
        driver.remove_cluster(cluster)
    assert not driver.cluster_dir(cluster).exists()


def test_job_cgroups_on_cgroup_v2_move_the_pod_into_a_leaf_first(tmp_path: Path) -> None:
    """cgroup v2's no-internal-processes rule, on a stand-in tree (this kernel mounts v1)."""
    driver = CgroupDriver(2, tmp_path)
    pod = driver.pod_dir("c", 0)
    pod.mkdir(parents=True)
    (pod / "cgroup.procs").write_text("")
    (pod / "cgroup.subtree_control").write_text("")
    shares = LocalJobShares(driver, "c", lambda sim: {})
    (result,) = shares.set_shares({0: {"a": 1000}})
    assert result.applied, result.detail
    assert (pod / "pod").is_dir() and (pod / "pod" / "cpu.weight").read_text() == str(driver.weight_for(100))
    assert (pod / "cgroup.subtree_control").read_text() == "+cpu"
    assert (pod / "job-a" / "cpu.weight").read_text() == str(driver.weight_for(1000))


ENDS = ("done", "failed", "cancelled", "timeout")


def test_a_timed_out_controller_says_timeout_for_what_it_cancelled_and_exits_non_zero(
    mc, machine: Any, tmp_path: Path
) -> None:
    build_proxy_solver()
    assert mc("up", str(_spec(tmp_path, "muxto", 2_000_000)), "--detach").returncode == 0
    timeline = tmp_path / "to.png"
    result = mc(
        "multiplex", "muxto", "--json", "--max", "1", "--total", "1", "--timeline", str(timeline),
        "--workdir", str(tmp_path / "work"), "--interval", "0.5", "--timeout", "8", timeout=120,
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    (sim,) = json.loads(result.stdout.strip().splitlines()[-1])["simulations"]
    assert sim["state"] == "timeout" and sim["reason"] == "controller timeout after 8s", sim
    events = list(read_events(timeline.with_suffix(".jsonl")))
    assert [e["kind"] for e in events if e["kind"] in ENDS] == ["timeout"]
    assert events[-1]["kind"] == "controller-stop" and events[-1]["cancelled"] == ["sim1"]
    # the cancel is sent before the controller stops; the job's processes end after it (CI: still RUN at once)
    wait_until(
        "sim1 CANCELED in the cluster's jobs",
        lambda: (
            "sim1 CANCELED"
            in mc("exec", "muxto", "--", "flux", "jobs", "-a", "--no-header", "-o", "{name} {status}").stdout
        ),
        timeout=60,
        interval=0.5,
    )


def test_a_simulation_that_fails_when_its_follower_is_killed_is_resubmitted_and_counted(
    mc, machine: Any, backend: Any, waiter: Any, minicluster_bin: str, tmp_path: Path
) -> None:
    """Kill pod 1's broker under the simulation: its job fails, the pod restarts, the controller resubmits it
    (--retries 1); killed again, it ends failed with its error, and the controller exits non-zero."""
    build_proxy_solver()
    fast = {"MINICLUSTERS_LOCAL_RESTART_DELAY": "0.2"}
    assert mc("up", str(_spec(tmp_path, "muxkill", 2_000_000)), "--detach", env=fast).returncode == 0
    supervisor = backend.store.load("muxkill").pods[1].pid
    timeline = tmp_path / "kill.png"
    events = timeline.with_suffix(".jsonl")
    argv = [
        minicluster_bin, "multiplex", "muxkill", "--json", "--max", "1", "--total", "1", "--retries", "1",
        "--timeline", str(timeline), "--workdir", str(tmp_path / "work"), "--settle", "1", "--interval", "0.5",
        "--profile-iterations", "20", "--timeout", "200",
    ]  # fmt: skip
    controller = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def kinds() -> list[str]:
        return [e["kind"] for e in read_events(events)] if events.is_file() else []

    try:
        assert waiter(lambda: "profiled" in kinds(), timeout=120, interval=0.5), kinds()
        os.kill(broker_of(supervisor), signal.SIGKILL)
        assert waiter(lambda: "retry" in kinds(), timeout=60, interval=0.5), kinds()
        assert waiter(lambda: kinds().count("running") == 2, timeout=90, interval=0.5), kinds()
        assert (tmp_path / "work" / "sim1-retry1").is_dir(), "the new attempt writes apart from the first"
        time.sleep(2)  # sleep: the retry runs a while on pod 1 before its broker is killed again
        os.kill(broker_of(supervisor), signal.SIGKILL)
        out, err = controller.communicate(timeout=150)
    finally:
        if controller.poll() is None:
            controller.kill()
            controller.communicate()
    assert controller.returncode == 1, err[-3000:]
    (sim,) = json.loads(out.strip().splitlines()[-1])["simulations"]
    assert sim["state"] == "failed" and sim["retries"] == 1, sim
    assert sim["reason"].startswith("flux job ") and "given up after 1 retries" in sim["reason"], sim
    assert [k for k in kinds() if k in ENDS] == ["failed"] and kinds().count("retry") == 1
