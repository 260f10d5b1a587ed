"""Per-job child cgroups inside a local pod: several simulations share a pod, each weighted by its need.

Layout: `<pod cgroup>/job-<sim>` holds that simulation's rank processes, with the weight the kubelet's mapping
gives its share of the pod's request (cgroup v1 cpu.shares, v2 cpu.weight). The pod's own cgroup keeps its
request's weight toward other pods, so the pod level and the job level compose the way a delegated pod cgroup
does on Kubernetes. The pod's other processes (broker, mpirun, orted, ranks not yet profiled) move to a
`<pod>/pod` leaf weighted by the pod's overhead: cgroup v2 forbids processes beside child cgroups that get
controllers ("no internal processes"), and on v1 every task left in the pod cgroup would count as a peer of
weight 1024 against the job cgroups' small weights and starve the ranks.
"""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Callable, Mapping
from pathlib import Path

from elasticity.control.multiplex_ports import SharesResult
from miniclusters.backends.local.cgroups import CgroupDriver, CgroupError

JOB_PREFIX = "job-"
POD_LEAF = "pod"


def _move(procs_file: Path, pid: int) -> bool:
    """Move one process (all its threads) into a cgroup; False when it is already gone."""
    try:
        procs_file.write_text(str(pid))
        return True
    except OSError as exc:
        if exc.errno == errno.ESRCH:
            return False
        raise CgroupError(f"cannot move pid {pid} into {procs_file.parent}: {exc.strerror or exc}") from None


def _procs(directory: Path) -> list[int]:
    try:
        return [int(w) for w in (directory / "cgroup.procs").read_text().split()]
    except OSError:
        return []


class LocalJobShares:
    """JobShares on the local backend's pod cgroups (v1 and v2)."""

    level = "job"

    def __init__(
        self,
        driver: CgroupDriver,
        cluster: str,
        pids_of: Callable[[str], Mapping[int, list[int]]],
        leaf_m: int = 100,
    ) -> None:
        self.driver = driver
        self.cluster = cluster
        self.pids_of = pids_of
        self.leaf_m = leaf_m
        """CPU (as a weight) of the pod's own processes beside the jobs: the pod's overhead."""
        """sim -> pod index -> the pids of its ranks on that pod (known once profiled)."""

    def job_dir(self, pod: int, sim: str) -> Path:
        return self.driver.pod_dir(self.cluster, pod) / f"{JOB_PREFIX}{sim}"

    def _prepare(self, pod_dir: Path) -> None:
        """Empty the pod cgroup into a weighted leaf; on v2 then hand the cpu controller down to the children."""
        leaf = pod_dir / POD_LEAF
        leaf.mkdir(exist_ok=True)
        (leaf / self.driver.knob).write_text(str(self.driver.weight_for(self.leaf_m)))
        for pid in _procs(pod_dir):
            _move(leaf / "cgroup.procs", pid)
        if self.driver.version == 2:
            control = pod_dir / "cgroup.subtree_control"
            if "cpu" not in control.read_text().split():
                control.write_text("+cpu")

    def set_shares(self, shares_m: Mapping[int, Mapping[str, int]]) -> list[SharesResult]:
        results = []
        for pod, by_sim in sorted(shares_m.items()):
            pod_dir = self.driver.pod_dir(self.cluster, pod)
            try:
                if not pod_dir.exists():
                    raise CgroupError(f"pod {pod} has no cgroup {pod_dir}")
                self._prepare(pod_dir)
                parts = []
                for sim, milli in sorted(by_sim.items()):
                    directory = self.job_dir(pod, sim)
                    directory.mkdir(exist_ok=True)
                    value = self.driver.weight_for(milli)
                    (directory / self.driver.knob).write_text(str(value))
                    for pid in self.pids_of(sim).get(pod, []):
                        _move(directory / "cgroup.procs", pid)
                    parts.append(f"{sim}: {milli}m -> {self.driver.knob} {value}, {len(_procs(directory))} procs")
                self._remove_stale(pod_dir, set(by_sim))
                results.append(SharesResult(pod, True, "; ".join(parts)))
            except (OSError, CgroupError) as exc:
                results.append(SharesResult(pod, False, str(exc)))
        return results

    def _remove_stale(self, pod_dir: Path, keep: set[str]) -> None:
        """Job cgroups of simulations no longer on the pod: removed once their processes are gone."""
        for child in pod_dir.iterdir():
            if child.is_dir() and child.name.startswith(JOB_PREFIX) and child.name[len(JOB_PREFIX) :] not in keep:
                with contextlib.suppress(OSError):
                    if not _procs(child):
                        child.rmdir()

    def weights(self, pod: int) -> dict[str, int]:
        """sim -> the weight its job cgroup has now (for status and tests)."""
        out = {}
        pod_dir = self.driver.pod_dir(self.cluster, pod)
        if pod_dir.exists():
            for child in pod_dir.iterdir():
                if child.is_dir() and child.name.startswith(JOB_PREFIX):
                    with contextlib.suppress(OSError, ValueError):
                        out[child.name[len(JOB_PREFIX) :]] = int((child / self.driver.knob).read_text())
        return out
