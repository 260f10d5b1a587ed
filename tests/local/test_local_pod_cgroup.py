"""Local pods see their CPU cgroup as a container does, so every rank reports its request and CPU time
(`resource.cpu`, what the lead's /cluster page shows), and an in-place resize shows at once."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from miniclusters.backends.local.cgroupfs import cgroup_mounts, remount_script

V1_MOUNTS = """tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0
cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0
cgroup /sys/fs/cgroup/cpuacct cgroup rw,relatime,cpuacct 0 0
cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0
"""
V2_MOUNTS = "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid,nodev,noexec,relatime,nsdelegate 0 0\n"
REPORTS = (
    "import json; from broker.jobs.api import JobClient; from broker.rest.web.cluster_data import request_millicores; "
    "c = JobClient(); reports = [c.handle.rpc('resource.cpu', {}, r, 5.0) for r in (0, 1)]; "
    "print(json.dumps([dict(r, request_m=request_millicores(r)) for r in reports]))"
)


def test_the_pod_gets_the_cpu_hierarchies_it_needs_and_only_those() -> None:
    assert cgroup_mounts(V1_MOUNTS) == [
        ("cgroup", "/sys/fs/cgroup/cpu", "cpu"),
        ("cgroup", "/sys/fs/cgroup/cpuacct", "cpuacct"),
        ("cgroup2", "/sys/fs/cgroup/unified", ""),
    ]
    v1 = remount_script(V1_MOUNTS)
    assert v1 and v1.startswith("{ mount -t tmpfs") and "mount -t cgroup -o cpu cgroup /sys/fs/cgroup/cpu " in v1
    v2 = remount_script(V2_MOUNTS)
    assert v2 and "tmpfs" not in v2 and "mount -t cgroup2 cgroup2 /sys/fs/cgroup;" in v2
    assert remount_script("proc /proc proc rw 0 0\n") is None


@pytest.mark.needs_root
def test_every_rank_reports_its_pod_request_and_a_resize_shows(
    mc: Callable[..., subprocess.CompletedProcess[str]], spec_writer: Callable[..., Path], tmp_path: Path
) -> None:
    spec = spec_writer(tmp_path, "podcpu", size=2, cpu="750m")
    assert mc("up", str(spec), "--detach", timeout=120).returncode == 0

    def reports() -> list[dict[str, Any]]:
        done = mc("exec", "podcpu", "--", "python3", "-c", REPORTS)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    try:
        first = reports()
        assert [r["rank"] for r in first] == [0, 1]
        assert all(r["request_m"] == 750 for r in first), first
        assert all(r["cgroup"].endswith(f"miniclusters/podcpu/{r['rank']}") for r in first), first
        assert all(isinstance(r["usage_usec"], int) and r["usage_usec"] > 0 for r in first)  # the brokers ran
        assert mc("resize", "podcpu", "1", "--cpu", "250m").returncode == 0
        after = reports()
        assert [r["request_m"] for r in after] == [750, 250]
    finally:
        mc("down", "podcpu")


@pytest.mark.parametrize("flavour", ["builtin", "flux"])
def test_the_lead_s_rest_state_dir_is_where_the_multiplexing_mirror_writes(tmp_path: Path, flavour: str) -> None:
    from miniclusters.backends.local.state import StateStore
    from miniclusters.multiplex.event_mirror import lead_log_path

    store = StateStore(tmp_path)
    store.cluster_dir("c").mkdir(parents=True)
    store.save_spec("c", {"spec": {"flux": {"flavour": flavour}}})
    mirrored = lead_log_path(store.pod_dir("c", 0) / "run", flavour)
    assert store.lead_rest_state_dir("c") / "controllers" / "multiplex.jsonl" == mirrored
