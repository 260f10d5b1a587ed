"""Exclusive CPUs on the local backend: each pinned pod in a cpuset cgroup of its own cores (v1 or v2).

The kubelet's static CPU manager gives a Guaranteed pod with integer CPU whole cores nobody else runs on; here
each such pod gets a cpuset cgroup (`<root>/miniclusters/<cluster>/<index>`, cpuset.cpus = its cores) that its
first process joins before it execs, so nothing it starts can run elsewhere. Which cores are free is read from
the cpuset cgroups themselves (every local cluster on this machine, whatever its state directory), and the
choice is the pure policy's (elasticity.policy.placement.assign_cores): refused rather than shared.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

from common import idset
from elasticity.policy.placement import assign_cores
from miniclusters.backends.local.cgroups import GROUP, CgroupError, PodGroups


@dataclass(frozen=True)
class CpusetDriver(PodGroups):
    """Pods' cpusets (``root``: v1, the cpuset hierarchy's mount; v2, the unified mount)."""

    def _cpus_file(self, directory: Path) -> Path:
        return directory / "cpuset.cpus"

    def machine_cpus(self) -> tuple[int, ...]:
        """CPUs this process may use that the root cpuset offers."""
        mine = set(os.sched_getaffinity(0))
        name = "cpuset.effective_cpus" if (self.root / "cpuset.effective_cpus").exists() else "cpuset.cpus"
        try:
            offered = set(idset.decode((self.root / name).read_text()))
        except (OSError, ValueError):
            offered = mine
        return tuple(sorted(mine & offered)) or tuple(sorted(mine))

    def taken(self, exclude: tuple[str, int] | None = None) -> set[int]:
        """Cores already given to pinned pods of any local cluster on this machine."""
        found: set[int] = set()
        base = self.root / GROUP
        if not base.is_dir():
            return found
        for cluster in base.iterdir():
            if not cluster.is_dir():
                continue
            for pod in cluster.iterdir():
                if not (pod.is_dir() and pod.name.isdigit()) or (cluster.name, int(pod.name)) == exclude:
                    continue
                with contextlib.suppress(OSError, ValueError):
                    found.update(idset.decode(self._cpus_file(pod).read_text()))
        return found

    def _prepare_parent(self, directory: Path) -> None:
        """v1: a new cpuset is empty until given CPUs and memory nodes (copied from its parent);
        v2: the cpuset controller is handed down through cgroup.subtree_control."""
        directory.mkdir(parents=True, exist_ok=True)
        if self.version == 1:
            for knob in ("cpuset.cpus", "cpuset.mems"):
                if not (directory / knob).read_text().strip():
                    (directory / knob).write_text((directory.parent / knob).read_text().strip())
        else:
            control = directory / "cgroup.subtree_control"
            if "cpuset" not in control.read_text().split():
                control.write_text("+cpuset")

    def create(self, cluster: str, index: int, cpus: tuple[int, ...]) -> Path:
        """The pod's cpuset holding exactly `cpus`; returns its cgroup.procs."""
        directory = self.pod_dir(cluster, index)
        try:
            if self.version == 2:
                self._prepare_parent(self.root)
            self._prepare_parent(self.root / GROUP)
            self._prepare_parent(self.cluster_dir(cluster))
            directory.mkdir(exist_ok=True)
            self._cpus_file(directory).write_text(idset.encode(cpus))
            if self.version == 1:
                mems = (directory.parent / "cpuset.mems").read_text().strip()
                (directory / "cpuset.mems").write_text(mems)
        except OSError as exc:
            raise CgroupError(f"cannot create cpuset {directory}: {exc.strerror or exc}") from None
        return self.procs_file(cluster, index)

    def cpus_of(self, cluster: str, index: int) -> tuple[int, ...] | None:
        try:
            return tuple(idset.decode(self._cpus_file(self.pod_dir(cluster, index)).read_text()))
        except (OSError, ValueError):
            return None


def choose_cores(driver: CpusetDriver, cluster: str, index: int, count: int) -> tuple[int, ...]:
    """`count` free cores for one pod (its own old cpuset, if any, counts as free); NotEnoughCores if none."""
    (cores,) = assign_cores(driver.machine_cpus(), driver.taken(exclude=(cluster, index)), [count])
    return cores


def detect(mounts_text: str | None = None) -> CpusetDriver | None:
    """The writable hierarchy with the cpuset controller: v1's cpuset mount, else a v2 mount offering cpuset."""
    if mounts_text is None:
        try:
            mounts_text = Path("/proc/self/mounts").read_text()
        except OSError:
            return None
    mounts = []
    for line in mounts_text.splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[2] in ("cgroup", "cgroup2"):
            mounts.append((fields[2], fields[1], set(fields[3].split(","))))
    for kind, point, options in mounts:
        if kind == "cgroup" and "cpuset" in options and os.access(point, os.W_OK):
            return CpusetDriver(1, Path(point))
    for kind, point, _ in mounts:
        if kind != "cgroup2":
            continue
        with contextlib.suppress(OSError):
            if "cpuset" in (Path(point) / "cgroup.controllers").read_text().split() and os.access(point, os.W_OK):
                return CpusetDriver(2, Path(point))
    return None
