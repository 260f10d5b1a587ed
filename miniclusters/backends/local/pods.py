"""One pod of a local MiniCluster started and stopped: its network, cgroups, pinned cores and process tree.

As root a pod gets its own network namespace (veth into a per-cluster bridge, its own address, host entries for
every pod name), its own UTS namespace (hostname `<name>-<i>`) and its own CPU cgroup whose weight follows the
pod's CPU request as the kubelet maps it (elasticity/model/cpu.py). Without root (or with
MINICLUSTERS_LOCAL_UNPRIVILEGED=1) pods are plain processes on 127.213.<slot>.x addresses, weighted with nice levels.
"""

from __future__ import annotations

import os
import shutil
import time

from common import idset
from elasticity.model import cpu as cpu_model
from elasticity.policy.placement import NotEnoughCores
from miniclusters.api.hosts import HostRegistry, pod_hostname
from miniclusters.backends.base import BackendError, InvalidRequestError
from miniclusters.backends.local import cgroups, cpusets, latency, netns, plan, process, restart, slots
from miniclusters.backends.local.core import LocalContext
from miniclusters.backends.local.state import ClusterRecord, PodRecord
from miniclusters.render.layout import ENTRYPOINT


class Pods:
    """Starts and stops one pod; the caller holds the store's lock and saves the record."""

    def __init__(self, context: LocalContext) -> None:
        self._ctx = context

    def start(self, record: ClusterRecord, index: int) -> None:
        """Network, cgroup, then the process (which joins the cgroup before it execs anything)."""
        pod = record.pods.get(index)
        if pod is None:  # added by a scale-up: the spec's request, as a new pod of the Job would get
            pod = PodRecord(
                index=index,
                hostname=pod_hostname(record.name, index),
                address=str(self._ctx.addressing(record).pod_address(index)),
                cpu_milli=record.cpu_milli,
                cpu_limit_milli=record.cpu_limit_milli,
                netns=plan.netns_name(record.name, index) if record.mode == "netns" else None,
            )
            record.pods[index] = pod
        addressing = self._ctx.addressing(record)
        pod_dir = self._ctx.store.pod_dir(record.name, index)
        try:
            if record.mode == "netns" and pod.netns:
                netns.create_pod_network(
                    addressing,
                    pod.netns,
                    index,
                    addressing.hosts_file(HostRegistry(record.name, record.max_size)),
                    pod.hostname,
                )
                if record.latency:
                    latency.add_latency(
                        pod.netns, record.latency, record.latency_method or "netem", pod_dir / "delayline.log"
                    )
            driver = self._ctx.driver(record)
            procs = None
            nice = None
            if driver is not None:
                driver.create(record.name, index, pod.cpu_milli, pod.cpu_limit_milli)
                procs = driver.procs_file(record.name, index)
            else:
                nice = cpu_model.milli_to_nice(pod.cpu_milli)
                if os.geteuid() != 0:
                    nice = max(nice, os.getpriority(os.PRIO_PROCESS, 0))
            pinned = self._ctx.cpuset_driver(record)
            cpuset_procs = None
            if pinned is not None:
                try:
                    cores = cpusets.choose_cores(pinned, record.name, index, record.exclusive_cores)
                except NotEnoughCores as exc:
                    raise InvalidRequestError(
                        f"pod {pod.hostname} (index {index}): spec.placement.cpus exclusive: {exc}; nothing shares "
                        "a pinned core, so lower the pods' CPU or stop other pinned MiniClusters"
                    ) from None
                cpuset_procs = pinned.create(record.name, index, cores)
                pod.cpus = idset.encode(cores)
            policy = restart.policy_for(
                index,
                record.restart_policy,
                record.backoff_limit,
                record.restart_delay,
                self._ctx.store.cluster_dir(record.name),
                pod_dir,
                procs,
                interactive=record.interactive,
            )
            launch = process.Launch(
                tag=self._ctx.tag(record, index),
                pod_dir=pod_dir,
                entrypoint=self._ctx.store.cluster_dir(record.name) / ENTRYPOINT,
                environment=self._ctx.pod_environment(record, pod),
                cwd=record.cwd,
                netns=pod.netns if record.mode == "netns" else None,
                hostname=pod.hostname,
                cgroup_procs=procs,
                cpuset_procs=cpuset_procs,
                nice=nice,
                restart=policy.to_env(),
            )
            child = process.start(launch)
        except (netns.NetworkError, latency.LatencyError, cgroups.CgroupError, OSError) as exc:
            raise BackendError(f"starting pod {pod.hostname} (index {index}): {exc}") from None
        pod.pid = child.pid
        pod.start_ticks = process.start_ticks(child.pid)
        pod.started_at = time.time()

    def stop(self, record: ClusterRecord, index: int, grace: float = 3.0) -> None:
        pod = record.pods.get(index)
        tag = self._ctx.tag(record, index)
        if pod is not None:
            process.stop(pod.pid, pod.start_ticks, tag, grace)
        driver = self._ctx.driver(record)
        if driver is not None:
            driver.remove(record.name, index)
        pinned = self._ctx.cpuset_driver(record)
        if pinned is not None:
            pinned.remove(record.name, index)
        if record.mode == "netns" and self.owns_slot(record):
            netns.delete_pod_network(plan.netns_name(record.name, index), record.slot, index)

    def remove(self, record: ClusterRecord, index: int) -> None:
        """A scale-down's pod: stopped, dropped from the record and its directory removed."""
        self.stop(record, index)
        record.pods.pop(index, None)
        shutil.rmtree(self._ctx.store.pod_dir(record.name, index), ignore_errors=True)

    def owns_slot(self, record: ClusterRecord) -> bool:
        """False when another cluster holds this record's slot now: its bridge and veths are not ours."""
        return not slots.held_by_other(self._ctx.store.cluster_dir(record.name), record.slot)
