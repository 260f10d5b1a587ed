"""Creating a local MiniCluster, starting and stopping its pods, and deleting it.

As root a pod gets its own network namespace (veth into a per-cluster bridge, its own address, host entries for
every pod name), its own UTS namespace (hostname `<name>-<i>`) and its own CPU cgroup whose weight follows the
pod's CPU request as the kubelet maps it (elasticity/model/cpu.py). Without root (or with
MINICLUSTERS_LOCAL_UNPRIVILEGED=1) pods are plain processes on 127.213.<slot>.x addresses, weighted with nice levels.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Any

from broker.curve_cert import render_zcert
from elasticity.model import cpu as cpu_model
from elasticity.policy.placement import NotEnoughCores, assign_cores, format_cpu_list
from miniclusters.api.hosts import HostRegistry, pod_hostname, registry_for
from miniclusters.api.quantity import cpu_millicores
from miniclusters.api.spec import DEFAULT_BROKER_PORT, MiniCluster
from miniclusters.backends.base import (
    BackendError,
    ClusterStatus,
    CreateOptions,
    InvalidRequestError,
    NotFoundError,
)
from miniclusters.backends.local import (
    cgroups,
    cpusets,
    flux_view,
    latency,
    netns,
    plan,
    process,
    programs,
    restart,
    slots,
)
from miniclusters.backends.local.bursts import Bursts, burst_idle_period
from miniclusters.backends.local.core import HOSTNAME_ENV, NAMESPACE, SOCKET_PATH_MAX
from miniclusters.backends.local.state import ClusterRecord, PodRecord
from miniclusters.backends.wait import wait_until_ready
from miniclusters.render import with_flavour
from miniclusters.render.broker_config import render_broker_toml
from miniclusters.render.entrypoint import render_entrypoint
from miniclusters.render.layout import BROKER_TOML, CURVE_FILE, ENTRYPOINT
from miniclusters.render.objects import certificate_for
from miniclusters.render.placement import exclusive_cores_per_pod, shape_for_placement

# In process mode every broker shares the machine's hostname: this `flux` tells `flux start` which pod it is
# (the built-in broker takes --hostname; flux-core takes the `hostname` broker attribute).
HOSTNAME_SHIM = """#!/bin/sh
# miniclusters local backend (unprivileged): pods share this machine's hostname, so tell the broker its pod name.
case "$1" in
  start|broker) sub="$1"; shift; exec {flux} "$sub" {option}="${{{env}}}" "$@" ;;
esac
exec {flux} "$@"
"""
HOSTNAME_OPTION = {"builtin": "--hostname", "flux": "-Shostname"}


def find_flux() -> Path:
    """The `flux` console script that belongs to this Python (the built-in broker)."""
    beside = Path(sys.executable).parent / "flux"
    if beside.exists():
        return beside
    found = shutil.which("flux")
    if found:
        return Path(found)
    raise BackendError(f"cannot find the built-in broker's `flux` command next to {sys.executable} or on PATH")


RESTFUL_CREDENTIALS = ("FLUX_USER", "FLUX_TOKEN", "FLUX_SECRET_KEY")


def restful_credentials(mc: MiniCluster) -> dict[str, str]:
    """The REST API's superuser and handshake secret, taken from the caller's environment at `up`.

    (On Kubernetes they come from spec.restful.secretName; here the caller's shell is the only safe source.)
    """
    if not mc.spec.restful.enabled:
        return {}
    return {k: os.environ[k] for k in RESTFUL_CREDENTIALS if os.environ.get(k)}


class Lifecycle(Bursts):
    """create, the pods' start and stop, delete."""

    def _check_supported(self, mc: MiniCluster) -> None:
        spec = mc.spec
        if spec.flux.broker_config:
            raise InvalidRequestError(
                "spec.flux.brokerConfig: a hand-written broker config names Kubernetes paths and DNS names; the "
                "local backend renders its own (drop the field to run locally)"
            )
        if spec.flux.bursting.hostlist and not spec.flux.bursting.lead_broker:
            raise InvalidRequestError(
                "spec.flux.bursting.hostlist: a static host list is the `flux` flavour's way to burst; the local "
                "backend bursts past maxSize with spec.flux.bursting.clusters (or `minicluster burst`)"
            )
        if spec.flux.bursting.clusters and spec.flux.flavour == "builtin":
            burst_idle_period()  # the burst service's setting, refused now rather than by the service later
        if spec.placement.cpus == "exclusive":
            if not self.privileged:
                raise InvalidRequestError(
                    "spec.placement.cpus: exclusive pins each pod to its own cores with a cpuset cgroup, which "
                    "needs root (netns mode); use cpus: shared, or run as root"
                )
            if cpusets.detect() is None:
                raise InvalidRequestError(
                    "spec.placement.cpus: exclusive needs a writable cpuset cgroup (v1 cpuset hierarchy or the v2 "
                    "cpuset controller), and this machine offers none; use cpus: shared"
                )
        if spec.effective_max_size > plan.MAX_LOCAL_PODS:
            raise InvalidRequestError(
                f"spec.maxSize={spec.effective_max_size}: the local backend runs at most {plan.MAX_LOCAL_PODS} pods"
            )

    def _flux_core(self) -> flux_view.FluxCore:
        try:
            return flux_view.find_flux_core()
        except flux_view.FluxCoreNotFound as exc:
            raise BackendError(str(exc)) from None

    def create(self, mc: MiniCluster, options: CreateOptions | None = None) -> ClusterStatus:
        """Write the rendered config, start pods 0..size-1, wait until every broker has joined the lead."""
        options = options or CreateOptions()
        mc = shape_for_placement(with_flavour(mc, options.render.flavour))  # spec.placement: workers, requests
        self._check_supported(mc)
        with self.store.lock():
            self._finish_teardown(mc.name)
            existed = self.store.exists(mc.name)
            try:
                record = self._prepare(mc, options)
            except BaseException:
                if not existed:  # nothing was started: drop the slot claim and any files written so far
                    slots.release(self.store.cluster_dir(mc.name))
                    self.store.remove(mc.name)
                raise
            try:
                for index in range(mc.spec.size):
                    self._start_pod(record, index)
                    self.store.save(record)
                if mc.spec.flux.bursting.clusters and mc.spec.flux.flavour == "builtin":  # flux: static hosts only
                    self._start_burst_service(mc, record)
            except BaseException:
                self._teardown(record)
                raise
        if not options.wait:
            return self.status(mc.name)
        try:
            return wait_until_ready(
                lambda: self.status(mc.name),
                timeout=options.timeout,
                clock=time.monotonic,
                sleep=time.sleep,
                interval=self.poll_interval,
                progress=self.progress,
            )
        except (KeyboardInterrupt, SystemExit):
            with self.store.lock():
                self._teardown(record)
            raise

    def _prepare(self, mc: MiniCluster, options: CreateOptions) -> ClusterRecord:
        """Refuse a duplicate, choose addresses, write config, certificate, entrypoint and state; start nothing."""
        name = mc.name
        if self.store.exists(name):
            raise InvalidRequestError(
                f"MiniCluster {name!r} already exists on this machine (state in {self.store.cluster_dir(name)}); "
                f"remove it first with `minicluster down {name}`, or choose another metadata.name"
            )
        mode = "netns" if self.privileged else "process"
        if mode == "netns":
            leftovers = sorted(n for n in netns.list_namespaces() if n.startswith(f"mc-{name}-"))
            clash = next((n for n in leftovers if netns.namespace_in_use(n)), None)
            if clash:
                raise InvalidRequestError(
                    f"MiniCluster {name!r}: network namespace {clash!r} already exists on this machine with "
                    f"processes in it (a cluster of this name from another state directory is running: "
                    f"`ip netns pids {clash}` lists them); choose another metadata.name"
                )
            for stale in leftovers:  # empty namespaces: a crashed run's leftovers, nobody lives there
                netns.delete_namespace(stale)
            if leftovers:
                self.notify(
                    f"removed {len(leftovers)} empty network namespace(s) left by a crashed run: {', '.join(leftovers)}"
                )
        latency_method: str | None = None
        if self.latency:
            if mode != "netns":
                raise InvalidRequestError(
                    f"--latency {self.latency}: network emulation needs root (pods in their own network "
                    "namespaces); unprivileged pods share the loopback interface"
                )
            latency_method, why = latency_probe()
            if latency_method is None:
                raise InvalidRequestError(
                    f"--latency {self.latency}: no way to delay packets on this machine ({why}); "
                    "load sch_netem (e.g. linux-modules-extra), or install iptables and libnetfilter-queue-dev "
                    "for the NFQUEUE delay line (`make setup`), or drop --latency"
                )
            if why:
                self.notify(f"--latency {self.latency}: netem is unavailable ({why}); using the NFQUEUE delay line")
        socket_path = self.store.pod_dir(name, mc.spec.effective_max_size - 1) / "tmp" / "flux-xxxxxxxx" / "local"
        if len(str(socket_path)) > SOCKET_PATH_MAX:
            raise InvalidRequestError(
                f"state directory {self.store.root} is too deep: the broker socket {socket_path} would exceed "
                f"{SOCKET_PATH_MAX} characters; set MINICLUSTERS_STATE_DIR to a shorter path"
            )
        runner = mc.spec.containers[mc.spec.flux_runner_index]
        requests, limits = runner.resources.requests, runner.resources.limits
        cpu = cpu_millicores(requests["cpu"]) if "cpu" in requests else 0
        cpu_limit = cpu_millicores(limits["cpu"]) if "cpu" in limits else None
        if cpu == 0 and cpu_limit:
            cpu = cpu_limit  # Kubernetes defaults a missing request to the limit

        try:
            program_path, image_environment = programs.provide_image(runner.image, self.notify)
        except programs.ProgramBuildError as exc:
            raise BackendError(f"spec.containers[{mc.spec.flux_runner_index}].image: {exc}") from None
        restart_policy, backoff_limit, restart_delay = restart.restart_settings(mc)
        taken = {self.store.load(other).slot for other in self.store.names()}
        routes = netns.routes_in_use() if mode == "netns" else []
        loopback = mode != "netns"
        try:
            slot = slots.claim(
                self.store.cluster_dir(name), lambda busy: plan.choose_slot(taken | busy, routes, loopback).slot
            )
        except RuntimeError as exc:
            raise BackendError(f"MiniCluster {name!r}: {exc}") from None
        addressing = plan.addressing_for(slot, loopback)
        driver = cgroups.detect(v2_formula=self.weight_formula) if mode == "netns" else None
        if mode == "netns" and driver is None:
            self.notify("notice: no writable cgroup cpu controller: pod CPU weights are approximated with nice levels")
        if mode == "process":
            self.notify(
                "notice: not root (or unprivileged mode): pods are plain processes on 127.213.x addresses sharing "
                "this machine's network, hostname and CPU cgroup (CPU weight approximated with nice levels)"
            )
        pinning = cpusets.detect() if mc.spec.placement.cpus == "exclusive" else None
        if pinning is not None:
            cores = exclusive_cores_per_pod(mc)
            try:
                assign_cores(pinning.machine_cpus(), pinning.taken(), [cores] * mc.spec.size)
            except NotEnoughCores as exc:
                raise InvalidRequestError(
                    f"spec.placement.cpus: exclusive gives each of the {mc.spec.size} pods {cores} core(s) of its "
                    f"own: {exc}; nothing shares a pinned core, so lower size, tasks or the CPU request, or stop "
                    "other pinned MiniClusters"
                ) from None
        flavour = mc.spec.flux.flavour
        environment = image_environment | dict(runner.environment) | restful_credentials(mc)
        if flavour == "flux":
            core = self._flux_core()
            flux = core.flux
            environment |= flux_environment(core, self.store.cluster_dir(name))
        else:
            flux = find_flux()
        cluster_dir = self.store.cluster_dir(name)
        broker_dir = flux.parent.parent
        if mode == "process":
            # A stand-in install: bin/flux is the shim (flux-core's own `flux` knows its prefix), lib the real one.
            broker_dir = cluster_dir / "broker"
            (broker_dir / "bin").mkdir(parents=True, exist_ok=True)
            shim = broker_dir / "bin" / "flux"
            shim.write_text(HOSTNAME_SHIM.format(flux=str(flux), option=HOSTNAME_OPTION[flavour], env=HOSTNAME_ENV))
            shim.chmod(0o755)
            if flavour == "flux":
                with contextlib.suppress(FileExistsError):
                    (broker_dir / "lib").symlink_to(flux.parent.parent / "lib")
                environment["MINICLUSTER_FLUX_VIEW"] = str(broker_dir)

        record = ClusterRecord(
            name=name,
            mode=mode,
            slot=addressing.slot,
            size=mc.spec.size,
            max_size=registry_for(mc).pods,
            min_size=mc.spec.min_size,
            broker_dir=str(broker_dir),
            cwd=os.getcwd(),
            environment=environment,
            flavour=flavour,
            program_path=str(program_path) if program_path else None,
            cgroup_version=driver.version if driver else None,
            cgroup_root=str(driver.root) if driver else None,
            weight_formula=self.weight_formula,
            latency=self.latency,
            latency_method=latency_method,
            cpu_milli=cpu,
            cpu_limit_milli=cpu_limit,
            exclusive_cores=exclusive_cores_per_pod(mc) if mc.spec.placement.cpus == "exclusive" else 0,
            cpuset_version=pinning.version if pinning else None,
            cpuset_root=str(pinning.root) if pinning else None,
            restart_policy=restart_policy,
            interactive=mc.spec.interactive,
            backoff_limit=backoff_limit,
            restart_delay=restart_delay,
        )
        for index in range(mc.spec.size):
            record.pods[index] = PodRecord(
                index=index,
                hostname=pod_hostname(name, index),
                address=str(addressing.pod_address(index)),
                cpu_milli=cpu,
                cpu_limit_milli=cpu_limit,
                netns=plan.netns_name(name, index) if mode == "netns" else None,
            )
        self._write_files(mc, record, addressing, options)
        self.store.save(record)
        return record

    def _write_files(
        self, mc: MiniCluster, record: ClusterRecord, addressing: plan.Addressing, options: CreateOptions
    ) -> None:
        cluster_dir = self.store.cluster_dir(mc.name)
        (cluster_dir / "config").mkdir(parents=True, exist_ok=True)
        (cluster_dir / "curve").mkdir(parents=True, exist_ok=True)
        curve = cluster_dir / "curve" / CURVE_FILE
        curve.write_text(render_zcert(certificate_for(mc, options.render.certificate)))
        curve.chmod(0o600)
        local: dict[str, Any] = {"curve_cert": str(curve), "r_file": str(cluster_dir / "R")}
        if record.mode == "netns":
            local["default_connect"] = "tcp://%h:%p"
        else:
            port = DEFAULT_BROKER_PORT
            local["hosts"] = [
                {
                    "host": host,
                    "bind": f"tcp://{addressing.pod_address(i)}:{port}",
                    "connect": f"tcp://{addressing.pod_address(i)}:{port}",
                }
                for i, host in enumerate(registry_for(mc).pod_hostnames())
            ]
        toml = render_broker_toml(mc, NAMESPACE, **local)
        (cluster_dir / "config" / BROKER_TOML).write_text(toml)
        (cluster_dir / ENTRYPOINT).write_text(render_entrypoint(mc))
        self.store.save_spec(mc.name, mc.to_dict())

    def _start_pod(self, record: ClusterRecord, index: int) -> None:
        """Network, cgroup, then the process (which joins the cgroup before it execs anything)."""
        pod = record.pods.get(index)
        if pod is None:  # added by a scale-up: the spec's request, as a new pod of the Job would get
            pod = PodRecord(
                index=index,
                hostname=pod_hostname(record.name, index),
                address=str(self._addressing(record).pod_address(index)),
                cpu_milli=record.cpu_milli,
                cpu_limit_milli=record.cpu_limit_milli,
                netns=plan.netns_name(record.name, index) if record.mode == "netns" else None,
            )
            record.pods[index] = pod
        addressing = self._addressing(record)
        pod_dir = self.store.pod_dir(record.name, index)
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
            driver = self._driver(record)
            procs = None
            nice = None
            if driver is not None:
                driver.create(record.name, index, pod.cpu_milli, pod.cpu_limit_milli)
                procs = driver.procs_file(record.name, index)
            else:
                nice = cpu_model.milli_to_nice(pod.cpu_milli)
                if os.geteuid() != 0:
                    nice = max(nice, os.getpriority(os.PRIO_PROCESS, 0))
            pinned = self._cpuset_driver(record)
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
                pod.cpus = format_cpu_list(cores)
            policy = restart.policy_for(
                index,
                record.restart_policy,
                record.backoff_limit,
                record.restart_delay,
                self.store.cluster_dir(record.name),
                pod_dir,
                procs,
                interactive=record.interactive,
            )
            launch = process.Launch(
                tag=self._tag(record, index),
                pod_dir=pod_dir,
                entrypoint=self.store.cluster_dir(record.name) / ENTRYPOINT,
                environment=self._pod_environment(record, pod),
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

    def _stop_pod(self, record: ClusterRecord, index: int, grace: float = 3.0) -> None:
        pod = record.pods.get(index)
        tag = self._tag(record, index)
        if pod is not None:
            process.stop(pod.pid, pod.start_ticks, tag, grace)
        driver = self._driver(record)
        if driver is not None:
            driver.remove(record.name, index)
        pinned = self._cpuset_driver(record)
        if pinned is not None:
            pinned.remove(record.name, index)
        if record.mode == "netns" and self._owns_slot(record):
            netns.delete_pod_network(plan.netns_name(record.name, index), record.slot, index)

    def _owns_slot(self, record: ClusterRecord) -> bool:
        """False when another cluster holds this record's slot now: its bridge and veths are not ours."""
        return not slots.held_by_other(self.store.cluster_dir(record.name), record.slot)

    def _teardown(self, record: ClusterRecord) -> None:
        """Stop every pod (all at once: SIGTERM everything, then wait), remove cgroups, namespaces, bridge, state.

        Marked deleting on disk before anything is removed, and every step may run again: a teardown cut short
        is finished by the next one (`_finish_teardown`)."""
        cluster_dir = self.store.cluster_dir(record.name)
        if not record.deleting and self.store.exists(record.name):
            record.deleting = True
            self.store.save(record)
        for pod in record.pods.values():
            if pod.pid is not None and process.alive(pod.pid, pod.start_ticks):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pod.pid, signal.SIGTERM)
        process.stop(None, None, f"{cluster_dir}#", grace=3.0, prefix=True)
        for index in sorted(set(record.pods) | set(range(record.max_size)), reverse=True):
            self._stop_pod(record, index, grace=0.5)
        driver = self._driver(record)
        if driver is not None:
            driver.remove_cluster(record.name)
        pinned = self._cpuset_driver(record)
        if pinned is not None:
            pinned.remove_cluster(record.name)
        if record.mode == "netns" and self._owns_slot(record):
            netns.delete_bridge(record.slot)
        slots.release(self.store.cluster_dir(record.name))
        self.store.remove(record.name)

    def exists(self, mc: MiniCluster) -> bool:
        return self.store.exists(mc.name)

    def _finish_teardown(self, name: str) -> bool:
        """Finish removing a cluster whose teardown was cut short (the store is locked); True when one was."""
        if self.store.remains(name):
            self.store.remove(name)
            return True
        if not self.store.exists(name):
            return False
        try:
            record = self.store.load(name)
        except (OSError, ValueError):
            return False
        if not record.deleting:
            return False
        self.notify(f"finishing the teardown of MiniCluster {name} that was cut short")
        self._teardown(record)
        return True

    def finish_teardown(self, name: str) -> bool:
        """`_finish_teardown` under the store's lock (`up` calls it after Ctrl-C cut its own teardown short)."""
        with self.store.lock():
            return self._finish_teardown(name)

    def stored_spec(self, name: str) -> dict[str, Any] | None:
        """The spec a cluster on this machine was created from (None when there is no such cluster, or only what a
        teardown cut short left of one)."""
        if not self.store.exists(name):
            return None
        with contextlib.suppress(OSError, ValueError):
            if self.store.load(name).deleting:
                return None
        try:
            return self.store.load_spec(name)
        except (OSError, ValueError):
            return {}

    def delete(self, name: str) -> None:
        with self.store.lock():
            if self.store.remains(name):  # a removal cut short after the cluster was gone: finish it quietly
                self.store.remove(name)
                return
            if not self.store.exists(name):
                raise NotFoundError(f"MiniCluster {name!r} not found on this machine (state {self.store.root})")
            for follower in self._bursts_of(name):  # a lead takes its bursts with it
                self._teardown(self.store.load(follower))
            self._teardown(self.store.load(name))


def flux_environment(core: flux_view.FluxCore, cluster_dir: Path) -> dict[str, str]:
    """What the entrypoint needs to run flux-core from a prefix instead of the flux-view mount.

    The bindings go on PYTHONPATH for the REST server, which runs on this Python (it has our package).
    """
    env = {
        "MINICLUSTER_FLUX_VIEW": str(core.prefix),
        "MINICLUSTER_R_FILE": str(cluster_dir / "R"),
        "MINICLUSTER_PYTHON": sys.executable,
    }
    if core.python_path is not None:
        env["PYTHONPATH"] = str(core.python_path)
    return env


def latency_probe() -> tuple[str | None, str]:
    return latency.choose_method()
