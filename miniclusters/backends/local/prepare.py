"""Before a local MiniCluster starts: whether this machine can run its spec, and its files on disk (addresses,
broker config, certificate, entrypoint, the state record). Nothing here starts a process.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path

from broker.curve_cert import render_zcert
from elasticity.policy.placement import NotEnoughCores, assign_cores
from miniclusters.api.hosts import pod_hostname, registry_for
from miniclusters.api.quantity import Quantity, cpu_millicores
from miniclusters.api.spec import DEFAULT_BROKER_PORT, MiniCluster
from miniclusters.backends.base import BackendError, CreateOptions, InvalidRequestError
from miniclusters.backends.local import cgroups, cpusets, flux_view, latency, netns, plan, programs, restart, slots
from miniclusters.backends.local.bursts import burst_idle_period
from miniclusters.backends.local.core import HOSTNAME_ENV, NAMESPACE, SOCKET_PATH_MAX, LocalContext
from miniclusters.backends.local.state import ClusterRecord, PodRecord
from miniclusters.render.broker_config import render_broker_toml
from miniclusters.render.entrypoint import render_entrypoint
from miniclusters.render.layout import BROKER_TOML, CURVE_FILE, ENTRYPOINT
from miniclusters.render.objects import certificate_for
from miniclusters.render.placement import exclusive_cores_per_pod
from miniclusters.render.shared_cores import shared_cores_environment

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


class Preparer:
    """Checks a spec against this machine and writes a new cluster's files and state record."""

    def __init__(self, context: LocalContext) -> None:
        self._ctx = context

    def check_supported(self, mc: MiniCluster) -> None:
        spec = mc.spec
        if spec.flux.broker_config:
            raise InvalidRequestError(
                "spec.flux.brokerConfig: a hand-written broker config names Kubernetes paths and DNS names; the "
                "local backend renders its own (drop the field to run locally)"
            )
        if spec.flux.bursting.hostlist and not spec.flux.bursting.lead_broker:
            raise InvalidRequestError(
                "spec.flux.bursting.hostlist: a static host list is the `flux` flavour's way to burst; the local "
                "backend bursts past maxSize with spec.flux.bursting.plugins (or `minicluster burst`)"
            )
        if spec.flux.bursting.clusters:
            raise InvalidRequestError(
                "spec.flux.bursting.clusters: the Flux Operator's bursted clusters are hosts that brokers in other "
                "Kubernetes clusters bring (their MiniClusters name this one's leadBroker); the local backend bursts "
                "past maxSize with spec.flux.bursting.plugins (or `minicluster burst`)"
            )
        if spec.flux.bursting.plugins and spec.flux.flavour == "builtin":
            burst_idle_period()  # the burst service's setting, refused now rather than by the service later
        if spec.placement.cpus == "exclusive":
            if not self._ctx.settings.privileged:
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

    def prepare(self, mc: MiniCluster, options: CreateOptions) -> ClusterRecord:
        """Refuse a duplicate, choose addresses, write config, certificate, entrypoint and state; start nothing."""
        name = mc.name
        store, settings = self._ctx.store, self._ctx.settings
        if store.exists(name):
            raise InvalidRequestError(
                f"MiniCluster {name!r} already exists on this machine (state in {store.cluster_dir(name)}); "
                f"remove it first with `minicluster down {name}`, or choose another metadata.name"
            )
        mode = "netns" if settings.privileged else "process"
        if mode == "netns":
            self._clear_namespaces(name)
        latency_method = self._latency_method(mode)
        socket_path = store.pod_dir(name, mc.spec.effective_max_size - 1) / "tmp" / "flux-xxxxxxxx" / "local"
        if len(str(socket_path)) > SOCKET_PATH_MAX:
            raise InvalidRequestError(
                f"state directory {store.root} is too deep: the broker socket {socket_path} would exceed "
                f"{SOCKET_PATH_MAX} characters; set MINICLUSTERS_STATE_DIR to a shorter path"
            )
        runner = mc.spec.containers[mc.spec.flux_runner_index]
        cpu, cpu_limit = runner_cpu(runner.resources.requests, runner.resources.limits)
        try:
            program_path, image_environment = programs.provide_image(runner.image, self._ctx.notify)
        except programs.ProgramBuildError as exc:
            raise BackendError(f"spec.containers[{mc.spec.flux_runner_index}].image: {exc}") from None
        restart_policy, backoff_limit, restart_delay = restart.restart_settings(mc)
        addressing = self._claim_addressing(name, mode)
        driver = self._cgroup_driver(mode)
        pinning = self._pinning(mc)
        environment = image_environment | dict(runner.environment) | restful_credentials(mc)
        flavour = mc.spec.flux.flavour
        if pinning is None:  # pods share this machine's cores: see render/shared_cores.py
            environment |= shared_cores_environment(flavour, environment)
        broker_dir = self._broker_dir(mc, mode, environment)

        pods = {
            index: PodRecord(
                index=index,
                hostname=pod_hostname(name, index),
                address=str(addressing.pod_address(index)),
                cpu_milli=cpu,
                cpu_limit_milli=cpu_limit,
                netns=plan.netns_name(name, index) if mode == "netns" else None,
            )
            for index in range(mc.spec.size)
        }
        record = ClusterRecord(
            name=name,
            pods=pods,
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
            weight_formula=settings.weight_formula,
            latency=settings.latency,
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
        self._write_files(mc, record, addressing, options)
        store.save(record)
        return record

    def _clear_namespaces(self, name: str) -> None:
        """Refuse a network namespace of this name in use; remove the empty ones a crashed run left."""
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
            self._ctx.notify(
                f"removed {len(leftovers)} empty network namespace(s) left by a crashed run: {', '.join(leftovers)}"
            )

    def _latency_method(self, mode: str) -> str | None:
        """How --latency delays packets here (None without --latency); refused where it cannot."""
        latency = self._ctx.settings.latency
        if not latency:
            return None
        if mode != "netns":
            raise InvalidRequestError(
                f"--latency {latency}: network emulation needs root (pods in their own network "
                "namespaces); unprivileged pods share the loopback interface"
            )
        method, why = latency_probe()
        if method is None:
            raise InvalidRequestError(
                f"--latency {latency}: no way to delay packets on this machine ({why}); "
                "load sch_netem (e.g. linux-modules-extra), or install iptables and libnetfilter-queue-dev "
                "for the NFQUEUE delay line (`make setup`), or drop --latency"
            )
        if why:
            self._ctx.notify(f"--latency {latency}: netem is unavailable ({why}); using the NFQUEUE delay line")
        return method

    def _claim_addressing(self, name: str, mode: str) -> plan.Addressing:
        """A slot no other cluster here holds (nor a route of this machine's), and its addresses."""
        store = self._ctx.store
        taken = {store.load(other).slot for other in store.names()}
        routes = netns.routes_in_use() if mode == "netns" else []
        loopback = mode != "netns"
        try:
            slot = slots.claim(
                store.cluster_dir(name), lambda busy: plan.choose_slot(taken | busy, routes, loopback).slot
            )
        except RuntimeError as exc:
            raise BackendError(f"MiniCluster {name!r}: {exc}") from None
        return plan.addressing_for(slot, loopback)

    def _cgroup_driver(self, mode: str) -> cgroups.CgroupDriver | None:
        """The cgroup CPU controller pods are weighed with (netns mode), saying when nice levels stand in."""
        driver = cgroups.detect(v2_formula=self._ctx.settings.weight_formula) if mode == "netns" else None
        if mode == "netns" and driver is None:
            self._ctx.notify(
                "notice: no writable cgroup cpu controller: pod CPU weights are approximated with nice levels"
            )
        if mode == "process":
            self._ctx.notify(
                "notice: not root (or unprivileged mode): pods are plain processes on 127.213.x addresses sharing "
                "this machine's network, hostname and CPU cgroup (CPU weight approximated with nice levels)"
            )
        return driver

    def _pinning(self, mc: MiniCluster) -> cpusets.CpusetDriver | None:
        """The cpuset controller for spec.placement.cpus exclusive, refused when the cores are not free."""
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
        return pinning

    def _broker_dir(self, mc: MiniCluster, mode: str, environment: dict[str, str]) -> Path:
        """The broker install the pods run (adding flux-core's variables to `environment`): in process mode a
        stand-in whose bin/flux is the hostname shim (flux-core's own `flux` knows its prefix), lib the real one."""
        flavour = mc.spec.flux.flavour
        cluster_dir = self._ctx.store.cluster_dir(mc.name)
        if flavour == "flux":
            core = self._flux_core()
            flux = core.flux
            environment |= flux_environment(core, cluster_dir)
        else:
            flux = find_flux()
        broker_dir = flux.parent.parent
        if mode == "process":
            broker_dir = cluster_dir / "broker"
            (broker_dir / "bin").mkdir(parents=True, exist_ok=True)
            shim = broker_dir / "bin" / "flux"
            shim.write_text(HOSTNAME_SHIM.format(flux=str(flux), option=HOSTNAME_OPTION[flavour], env=HOSTNAME_ENV))
            shim.chmod(0o755)
            if flavour == "flux":
                with contextlib.suppress(FileExistsError):
                    (broker_dir / "lib").symlink_to(flux.parent.parent / "lib")
                environment["MINICLUSTER_FLUX_VIEW"] = str(broker_dir)
        return broker_dir

    def _write_files(
        self, mc: MiniCluster, record: ClusterRecord, addressing: plan.Addressing, options: CreateOptions
    ) -> None:
        cluster_dir = self._ctx.store.cluster_dir(mc.name)
        (cluster_dir / "config").mkdir(parents=True, exist_ok=True)
        (cluster_dir / "curve").mkdir(parents=True, exist_ok=True)
        curve = cluster_dir / "curve" / CURVE_FILE
        curve.write_text(render_zcert(certificate_for(mc, options.render.certificate)))
        curve.chmod(0o600)
        default_connect: str | None = None
        hosts: list[dict[str, str]] | None = None
        if record.mode == "netns":
            default_connect = "tcp://%h:%p"
        else:
            port = DEFAULT_BROKER_PORT
            hosts = [
                {
                    "host": host,
                    "bind": f"tcp://{addressing.pod_address(i)}:{port}",
                    "connect": f"tcp://{addressing.pod_address(i)}:{port}",
                }
                for i, host in enumerate(registry_for(mc).pod_hostnames())
            ]
        toml = render_broker_toml(
            mc,
            NAMESPACE,
            curve_cert=str(curve),
            r_file=str(cluster_dir / "R"),
            default_connect=default_connect,
            hosts=hosts,
        )
        (cluster_dir / "config" / BROKER_TOML).write_text(toml)
        (cluster_dir / ENTRYPOINT).write_text(render_entrypoint(mc))
        self._ctx.store.save_spec(mc.name, mc.to_dict())


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


def runner_cpu(requests: Mapping[str, Quantity], limits: Mapping[str, Quantity]) -> tuple[int, int | None]:
    """(request, limit) in millicores of the runner container; a missing request is the limit, as in Kubernetes."""
    cpu = cpu_millicores(requests["cpu"]) if "cpu" in requests else 0
    cpu_limit = cpu_millicores(limits["cpu"]) if "cpu" in limits else None
    if cpu == 0 and cpu_limit:
        cpu = cpu_limit  # Kubernetes defaults a missing request to the limit
    return cpu, cpu_limit


def latency_probe() -> tuple[str | None, str]:
    return latency.choose_method()
