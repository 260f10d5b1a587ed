"""What this broker may really use (CPU affinity ∩ cgroup CPU limit, memory limit), and the R document.

Flux in a pod reports the node's hardware; here each broker reports its own usable slice.
All readers take their inputs as parameters so tests can point them at a fake cgroup tree.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path

from common import idset

from .bootstrap import compress_hosts
from .payloads import ResourceReport, RLiteEntry, RSpec

CGROUP_ROOT = "/sys/fs/cgroup"
_V1_CPU_DIRS = ("cpu,cpuacct", "cpu", "cpuacct,cpu")
_V1_MEM_DIRS = ("memory",)
_UNLIMITED_MEMORY = 1 << 60


def parse_proc_cgroup(text: str) -> tuple[dict[str, str], str | None]:
    """/proc/self/cgroup -> ({v1 controller: path}, v2 path or None)."""
    v1: dict[str, str] = {}
    v2: str | None = None
    for line in text.splitlines():
        parts = line.strip().split(":", 2)
        if len(parts) != 3:
            continue
        hierarchy, controllers, path = parts
        if hierarchy == "0" and controllers == "":
            v2 = path
        for controller in controllers.split(","):
            if controller:
                v1[controller] = path
    return v1, v2


def _chain(mount: Path, path: str) -> list[Path]:
    """The cgroup directory and its ancestors up to the mount (limits on any of them apply)."""
    dirs: list[Path] = []
    relative = Path(path.lstrip("/"))
    candidate = mount / relative
    if not candidate.is_dir():  # inside a cgroup namespace the host path is not visible
        return [mount]
    while True:
        dirs.append(candidate)
        if candidate == mount or relative == Path("."):
            break
        relative = relative.parent
        candidate = mount / relative
    return dirs


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _cgroup_dirs(controller: str, v1_dirs: tuple[str, ...], root: Path, proc_cgroup: str) -> list[tuple[str, Path]]:
    """(version, directory) pairs to inspect for a controller, v1 first (it wins in hybrid setups)."""
    v1, v2 = parse_proc_cgroup(proc_cgroup)
    found: list[tuple[str, Path]] = []
    if controller in v1:
        for name in v1_dirs:
            mount = root / name
            if mount.is_dir():
                found += [("v1", d) for d in _chain(mount, v1[controller])]
                break
    if v2 is not None:
        mount = root if (root / "cgroup.controllers").exists() else root / "unified"
        if mount.is_dir():
            found += [("v2", d) for d in _chain(mount, v2)]
    return found


def _self_cgroup() -> str:
    return _read(Path("/proc/self/cgroup")) or ""


def cgroup_cpu_limit(root: str | Path = CGROUP_ROOT, proc_cgroup: str | None = None) -> float | None:
    """CPUs allowed by CFS bandwidth (v1 cpu.cfs_quota_us/cpu.cfs_period_us, v2 cpu.max); None if unlimited."""
    text = _self_cgroup() if proc_cgroup is None else proc_cgroup
    limits: list[float] = []
    for version, directory in _cgroup_dirs("cpu", _V1_CPU_DIRS, Path(root), text):
        if version == "v1":
            quota, period = _read(directory / "cpu.cfs_quota_us"), _read(directory / "cpu.cfs_period_us")
            valid = quota and period and quota.lstrip("-").isdigit() and period.isdigit()
            if valid and int(quota or 0) > 0 and int(period or 0) > 0:
                limits.append(int(quota or 0) / int(period or 1))
        else:
            value = _read(directory / "cpu.max")
            if value:
                fields = value.split()
                if fields[0] != "max" and fields[0].isdigit():
                    period_v2 = int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else 100000
                    if period_v2 > 0:
                        limits.append(int(fields[0]) / period_v2)
    return min(limits) if limits else None


def cgroup_memory_limit(root: str | Path = CGROUP_ROOT, proc_cgroup: str | None = None) -> int | None:
    """Bytes allowed by memory.limit_in_bytes (v1) or memory.max (v2); None if unlimited."""
    text = _self_cgroup() if proc_cgroup is None else proc_cgroup
    limits: list[int] = []
    for version, directory in _cgroup_dirs("memory", _V1_MEM_DIRS, Path(root), text):
        value = _read(directory / ("memory.limit_in_bytes" if version == "v1" else "memory.max"))
        if value and value.isdigit() and int(value) < _UNLIMITED_MEMORY:
            limits.append(int(value))
    return min(limits) if limits else None


def meminfo_total(path: str | Path = "/proc/meminfo") -> int:
    """MemTotal in bytes (0 if unreadable)."""
    text = _read(Path(path)) or ""
    for line in text.splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    return 0


def usable_cores(affinity: set[int], cpu_limit: float | None) -> list[int]:
    """The CPUs the broker may schedule on: its affinity, trimmed to ceil(limit) CPUs (at least one)."""
    cpus = sorted(affinity)
    if cpu_limit is not None:
        cpus = cpus[: max(1, math.ceil(cpu_limit - 1e-9))]
    return cpus


def local_resources(
    rank: int,
    hostname: str,
    root: str | Path = CGROUP_ROOT,
    proc_cgroup: str | None = None,
    affinity: set[int] | None = None,
    meminfo: str | Path = "/proc/meminfo",
) -> ResourceReport:
    """This broker's report: usable cores (ids and count), memory bytes, hostname."""
    cpus = usable_cores(os.sched_getaffinity(0) if affinity is None else affinity, cgroup_cpu_limit(root, proc_cgroup))
    total = meminfo_total(meminfo)
    limit = cgroup_memory_limit(root, proc_cgroup)
    memory = min(total, limit) if limit is not None and total else (limit or total)
    return {"rank": rank, "hostname": hostname, "cores": idset.encode(cpus), "ncores": len(cpus), "memory": memory}


def build_R(reports: Mapping[int, ResourceReport], starttime: float = 0.0, expiration: float = 0.0) -> RSpec:
    """Flux's R (version 1, R_lite): ranks with identical core sets share one entry; nodelist in rank order."""
    by_cores: dict[str, list[int]] = {}
    for rank in sorted(reports):
        by_cores.setdefault(str(reports[rank]["cores"]), []).append(rank)
    entries = sorted(by_cores.items(), key=lambda item: item[1][0])
    r_lite: list[RLiteEntry] = [{"rank": idset.encode(ranks), "children": {"core": cores}} for cores, ranks in entries]
    hosts = [str(reports[rank]["hostname"]) for rank in sorted(reports)]
    return {
        "version": 1,
        "execution": {
            "R_lite": r_lite,
            "starttime": starttime,
            "expiration": expiration,
            "nodelist": [compress_hosts(hosts)] if hosts else [],
        },
    }
