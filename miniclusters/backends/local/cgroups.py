"""One CPU cgroup per local pod, on cgroup v1 (cpu.shares) or v2 (cpu.weight): create, write, read back, remove.

A pod's processes are moved in before they exec (the launcher writes its own pid to cgroup.procs), so every
broker and job process is weighted from its first instruction. Resizing writes the weight in place; nothing is
restarted, as with the kubelet's in-place resize.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from elasticity.model import cpu as cpu_model
from miniclusters.errors import MiniclustersError

GROUP = "miniclusters"


class CgroupError(MiniclustersError, RuntimeError):
    """A cgroup could not be created, written or removed."""


@dataclass(frozen=True)
class PodGroups:
    """Where the pods' cgroups of local clusters live in one hierarchy: ``<root>/miniclusters/<cluster>/<index>``
    (the cpu one and the cpuset one are laid out alike)."""

    version: int
    root: Path
    """The mount of the hierarchy (v1: the controller's own; v2: the unified one)."""

    def cluster_dir(self, cluster: str) -> Path:
        return self.root / GROUP / cluster

    def pod_dir(self, cluster: str, index: int) -> Path:
        return self.cluster_dir(cluster) / str(index)

    def procs_file(self, cluster: str, index: int) -> Path:
        return self.pod_dir(cluster, index) / "cgroup.procs"

    def remove(self, cluster: str, index: int, timeout: float = 5.0) -> None:
        """Kill whatever is left in the pod's cgroup (and its per-job cgroups, multiplexing) and remove it."""
        directory = self.pod_dir(cluster, index)
        if directory.exists():
            remove_tree(directory, timeout)

    def remove_cluster(self, cluster: str) -> None:
        directory = self.cluster_dir(cluster)
        if not directory.exists():
            return
        for child in directory.iterdir():
            if child.is_dir() and child.name.isdigit():
                self.remove(cluster, int(child.name))
        with contextlib.suppress(OSError):
            directory.rmdir()
        with contextlib.suppress(OSError):  # the shared parent goes too once no cluster is left in it
            directory.parent.rmdir()


@dataclass(frozen=True)
class CgroupDriver(PodGroups):
    """Where pod cgroups live and which knob carries the CPU weight."""

    v2_formula: str = "nonlinear"

    @property
    def knob(self) -> str:
        return "cpu.shares" if self.version == 1 else "cpu.weight"

    # ------------------------------------------------------------------ weights
    def weight_for(self, milli: int) -> int:
        if self.version == 1:
            return cpu_model.milli_to_shares(milli)
        return cpu_model.milli_to_weight(milli, self.v2_formula)

    def milli_for(self, value: int, hint: int | None = None) -> int:
        if self.version == 1:
            shares = cpu_model.milli_to_shares(hint) if hint is not None else None
            return hint if hint is not None and shares == value else cpu_model.shares_to_milli(value)
        return cpu_model.weight_to_milli(value, self.v2_formula, hint)

    # ------------------------------------------------------------------ life cycle
    def create(self, cluster: str, index: int, milli: int, limit_milli: int | None = None) -> Path:
        """Make the pod's cgroup with its CPU weight (and a CFS quota only when a limit was asked for)."""
        directory = self.pod_dir(cluster, index)
        try:
            if self.version == 2:
                self._enable_cpu(self.root / GROUP)
                self._enable_cpu(self.cluster_dir(cluster))
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CgroupError(f"cannot create cgroup {directory}: {exc.strerror or exc}") from None
        self.set_weight(cluster, index, milli)
        if limit_milli:
            self._set_limit(directory, limit_milli)
        return directory

    def _enable_cpu(self, directory: Path) -> None:
        """cgroup v2 hands the cpu controller down level by level through cgroup.subtree_control."""
        directory.mkdir(parents=True, exist_ok=True)
        control = directory / "cgroup.subtree_control"
        if "cpu" not in control.read_text().split():
            control.write_text("+cpu")

    def _set_limit(self, directory: Path, limit_milli: int) -> None:
        if self.version == 1:
            period = int((directory / "cpu.cfs_period_us").read_text())
            (directory / "cpu.cfs_quota_us").write_text(str(cpu_model.limit_to_quota(limit_milli, period)))
        else:
            (directory / "cpu.max").write_text(f"{cpu_model.limit_to_quota(limit_milli)} 100000")

    def set_weight(self, cluster: str, index: int, milli: int) -> int:
        """Write the weight for `milli` in place; returns the value written."""
        value = self.weight_for(milli)
        path = self.pod_dir(cluster, index) / self.knob
        try:
            path.write_text(str(value))
        except OSError as exc:
            raise CgroupError(f"cannot write {path}: {exc.strerror or exc}") from None
        return value

    def read_weight(self, cluster: str, index: int) -> int | None:
        try:
            return int((self.pod_dir(cluster, index) / self.knob).read_text().strip())
        except (OSError, ValueError):
            return None

    def pids(self, cluster: str, index: int) -> list[int]:
        try:
            text = self.procs_file(cluster, index).read_text()
        except OSError:
            return []
        return [int(word) for word in text.split()]


def remove_tree(directory: Path, timeout: float = 5.0) -> None:
    """Kill the tasks of a cgroup and its descendants and remove them, deepest first."""
    for child in sorted(p for p in directory.iterdir() if p.is_dir()):
        remove_tree(child, timeout)
    deadline = time.monotonic() + timeout
    while True:
        try:
            pids = [int(w) for w in (directory / "cgroup.procs").read_text().split()]
        except OSError:
            pids = []
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        try:
            directory.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError as exc:
            if exc.errno != errno.EBUSY or time.monotonic() >= deadline:
                raise CgroupError(f"cannot remove cgroup {directory}: {exc.strerror or exc}") from None
            time.sleep(0.05)


def _mounts(text: str) -> list[tuple[str, str, set[str]]]:
    """(type, mount point, options) for every cgroup mount in /proc/self/mounts."""
    out = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[2] in ("cgroup", "cgroup2"):
            out.append((fields[2], fields[1], set(fields[3].split(","))))
    return out


def detect(mounts_text: str | None = None, v2_formula: str = "nonlinear") -> CgroupDriver | None:
    """The writable hierarchy holding the cpu controller: v1's cpu mount first, else the v2 mount; None if neither."""
    if mounts_text is None:
        try:
            mounts_text = Path("/proc/self/mounts").read_text()
        except OSError:
            return None
    mounts = _mounts(mounts_text)
    for kind, point, options in mounts:
        if kind == "cgroup" and "cpu" in options and os.access(point, os.W_OK):
            return CgroupDriver(1, Path(point), v2_formula)
    for kind, point, _ in mounts:
        if kind != "cgroup2":
            continue
        controllers = Path(point) / "cgroup.controllers"
        try:
            if "cpu" in controllers.read_text().split() and os.access(point, os.W_OK):
                return CgroupDriver(2, Path(point), v2_formula)
        except OSError:
            continue
    return None
