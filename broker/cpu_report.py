"""What this pod's CPU cgroup says: its weight (cpu.shares or cpu.weight) and its CPU time so far.

Every rank answers `resource.cpu` for itself with this report, so the lead's pages can show CPU requested vs
in use per pod without any Kubernetes API access: the kubelet writes the request into the container's cgroup
(v1 cpu.shares, v2 cpu.weight), and the kernel counts the CPU time (v1 cpuacct.usage, v2 cpu.stat usage_usec).
The caller maps the weight back to a request (elasticity/model/cpu.py: numpy, which the broker never loads) and
turns two reports into a rate. All readers take their paths as parameters so tests can point them at a fake
cgroup tree.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from .payloads import CpuReport
from .resources import _V1_CPU_DIRS, CGROUP_ROOT, _cgroup_dirs, _read, _self_cgroup, parse_proc_cgroup

POD_LEAF = "pod"
"""A local pod whose job cgroups split it keeps its own processes in `<pod>/pod` (cgroup v2's no-internal-process
rule); the request is the pod's, one level up."""


def _int(text: str | None) -> int | None:
    return int(text) if text is not None and text.strip().isdigit() else None


def _process_usage_usec(directory: Path, proc: Path) -> int | None:
    """CPU time of the processes in the cgroup and its children now (and of their reaped children): v1 without
    cpuacct there. Child cgroups count: multiplexing puts each simulation's ranks in `<pod>/job-<sim>`."""
    pids = [pid for procs in sorted(directory.rglob("cgroup.procs")) for pid in (_read(procs) or "").split()]
    if not pids:
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        stat = _read(proc / pid / "stat")
        if stat is None:
            continue  # it exited between the two reads
        fields = stat.rpartition(")")[2].split()
        total += sum(int(fields[i]) for i in (11, 12, 13, 14))  # utime stime cutime cstime (stat fields 14-17)
    return total * 1_000_000 // ticks


def _usage_usec(
    version: str, directory: Path, mount: Path, root: Path, text: str, proc: Path
) -> tuple[int | None, str]:
    """(CPU time in microseconds, where it was read)."""
    if version == "v2":
        for line in (_read(directory / "cpu.stat") or "").splitlines():
            name, _, value = line.partition(" ")
            if name == "usage_usec":
                return _int(value), "cpu.stat"
        return None, ""
    nanoseconds = _int(_read(directory / "cpuacct.usage"))  # cpu and cpuacct mounted together
    if nanoseconds is None:
        v1, _ = parse_proc_cgroup(text)
        if v1.get("cpuacct") == v1.get("cpu"):  # the same group in the separate cpuacct hierarchy
            nanoseconds = _int(_read(root / "cpuacct" / directory.relative_to(mount) / "cpuacct.usage"))
    if nanoseconds is not None:
        return nanoseconds // 1000, "cpuacct.usage"
    return _process_usage_usec(directory, proc), "processes"


def cpu_report(root: str | Path = CGROUP_ROOT, proc_cgroup: str | None = None, proc: str | Path = "/proc") -> CpuReport:
    """{"cgroup", "knob", "weight", "usage_usec", "usage_from", "time"} ({"cgroup": ""} without a cgroup)."""
    text = _self_cgroup() if proc_cgroup is None else proc_cgroup
    dirs = _cgroup_dirs("cpu", _V1_CPU_DIRS, Path(root), text)
    if not dirs:
        return {"cgroup": "", "time": time.monotonic()}
    version, directory = dirs[0]
    mount = [d for v, d in dirs if v == version][-1]
    if directory.name == POD_LEAF and len(dirs) > 1:
        directory = dirs[1][1]
    knob = "cpu.shares" if version == "v1" else "cpu.weight"
    weight = _int(_read(directory / knob))
    usage, source = _usage_usec(version, directory, mount, Path(root), text, Path(proc))
    return {
        "cgroup": str(directory),
        "knob": knob,
        "weight": weight,
        "usage_usec": usage,
        "usage_from": source,
        "time": time.monotonic(),
    }
