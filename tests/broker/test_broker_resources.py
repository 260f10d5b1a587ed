"""Usable cores/memory from affinity and a fake cgroup tree (v1 and v2), and the R document."""

from __future__ import annotations

from pathlib import Path

from broker.payloads import ResourceReport
from broker.resources import (
    build_R,
    cgroup_cpu_limit,
    cgroup_memory_limit,
    local_resources,
    parse_proc_cgroup,
    usable_cores,
)

V1_SELF = "4:memory:/kubepods/pod1/c1\n3:cpu,cpuacct:/kubepods/pod1/c1\n1:name=systemd:/x\n"
V2_SELF = "0::/kubepods.slice/pod1/c1\n"


def fake_v1(root: Path, quota: int, period: int = 100000, parent_quota: int = -1, mem: int | None = None) -> None:
    pod = root / "cpu,cpuacct" / "kubepods" / "pod1"
    (pod / "c1").mkdir(parents=True)
    (pod / "cpu.cfs_quota_us").write_text(f"{parent_quota}\n")
    (pod / "cpu.cfs_period_us").write_text("100000\n")
    (pod / "c1" / "cpu.cfs_quota_us").write_text(f"{quota}\n")
    (pod / "c1" / "cpu.cfs_period_us").write_text(f"{period}\n")
    memdir = root / "memory" / "kubepods" / "pod1" / "c1"
    memdir.mkdir(parents=True)
    (memdir / "memory.limit_in_bytes").write_text(f"{mem if mem else 9223372036854771712}\n")


def fake_v2(root: Path, cpu_max: str, mem: str = "max") -> None:
    (root / "cgroup.controllers").write_text("cpu memory\n")
    leaf = root / "kubepods.slice" / "pod1" / "c1"
    leaf.mkdir(parents=True)
    (leaf / "cpu.max").write_text(cpu_max + "\n")
    (leaf / "memory.max").write_text(mem + "\n")


def test_parse_proc_cgroup() -> None:
    v1, v2 = parse_proc_cgroup(V1_SELF + "0::/u\n")
    assert v1["cpu"] == "/kubepods/pod1/c1" and v1["memory"] == "/kubepods/pod1/c1" and v2 == "/u"


def test_v1_quota(tmp_path: Path) -> None:
    fake_v1(tmp_path, quota=150000, mem=2 << 30)
    assert cgroup_cpu_limit(tmp_path, V1_SELF) == 1.5
    assert cgroup_memory_limit(tmp_path, V1_SELF) == 2 << 30


def test_v1_unlimited_leaf_but_limited_parent(tmp_path: Path) -> None:
    fake_v1(tmp_path, quota=-1, parent_quota=200000)
    assert cgroup_cpu_limit(tmp_path, V1_SELF) == 2.0
    assert cgroup_memory_limit(tmp_path, V1_SELF) is None


def test_v2_cpu_max(tmp_path: Path) -> None:
    fake_v2(tmp_path, "250000 100000", "1073741824")
    assert cgroup_cpu_limit(tmp_path, V2_SELF) == 2.5
    assert cgroup_memory_limit(tmp_path, V2_SELF) == 1 << 30


def test_v2_unlimited_and_namespaced(tmp_path: Path) -> None:
    fake_v2(tmp_path, "max 100000")
    assert cgroup_cpu_limit(tmp_path, V2_SELF) is None
    (tmp_path / "cpu.max").write_text("100000 100000\n")  # inside a cgroup namespace: the mount root is ours
    assert cgroup_cpu_limit(tmp_path, "0::/not/visible/here\n") == 1.0


def test_usable_cores_intersects_affinity_with_quota() -> None:
    assert usable_cores({0, 1, 2, 3, 4, 5, 6, 7}, 2.0) == [0, 1]
    assert usable_cores({4, 5, 6, 7}, 1.5) == [4, 5]
    assert usable_cores({2, 3}, 0.2) == [2]
    assert usable_cores({2, 3}, 16.0) == [2, 3]
    assert usable_cores({0, 1, 2}, None) == [0, 1, 2]


def test_local_resources_with_fake_tree(tmp_path: Path) -> None:
    fake_v2(tmp_path, "300000 100000", str(3 << 30))
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       16384000 kB\nMemFree: 1 kB\n")
    report = local_resources(5, "node5", tmp_path, V2_SELF, affinity=set(range(16)), meminfo=meminfo)
    assert report == {"rank": 5, "hostname": "node5", "cores": "0-2", "ncores": 3, "memory": 3 << 30}
    fake_v1(tmp_path / "v1", quota=-1)
    report = local_resources(0, "n", tmp_path / "v1", V1_SELF, affinity={0, 1}, meminfo=meminfo)
    assert report["ncores"] == 2 and report["memory"] == 16384000 * 1024


def test_R_lite_groups_identical_ranks() -> None:
    reports: dict[int, ResourceReport] = {r: {"hostname": f"flux-sample-{r}", "cores": "0-7"} for r in range(4)}
    assert build_R(reports) == {
        "version": 1,
        "execution": {
            "R_lite": [{"rank": "0-3", "children": {"core": "0-7"}}],
            "starttime": 0.0,
            "expiration": 0.0,
            "nodelist": ["flux-sample-[0-3]"],
        },
    }
    reports[2]["cores"] = "0-1"
    r_lite = build_R(reports)["execution"]["R_lite"]
    assert r_lite == [{"rank": "0-1,3", "children": {"core": "0-7"}}, {"rank": "2", "children": {"core": "0-1"}}]
