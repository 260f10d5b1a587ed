"""The local backend: a MiniCluster on this machine from the same spec, rendered config and certificate.

Each pod is a supervised process tree running the rendered entrypoint with JOB_COMPLETION_INDEX, as in an
Indexed Job. As root a pod also gets its own network namespace (veth into a per-cluster bridge, its own address,
host entries for every pod name), its own UTS namespace (hostname `<name>-<i>`) and its own CPU cgroup whose weight
follows the pod's CPU request as the kubelet maps it. Without root (or with MINICLUSTERS_LOCAL_UNPRIVILEGED=1)
pods are plain processes on 127.213.<slot>.x addresses, weighted with nice levels.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from broker.curve_cert import render_zcert
from elasticity.model import cpu as cpu_model
from miniclusters.api import SpecError, load_minicluster
from miniclusters.api.quantity import cpu_millicores, format_millicores
from miniclusters.api.spec import DEFAULT_BROKER_PORT, MiniCluster
from miniclusters.backends.base import (
    BackendError,
    ClusterCondition,
    ClusterStatus,
    ClusterSummary,
    CreateOptions,
    ExecResult,
    InvalidRequestError,
    NotFoundError,
    PodStatus,
    ResizeOutcome,
    ResizeResult,
)
from miniclusters.backends.kubernetes.lead import parse_overlay
from miniclusters.backends.kubernetes.wait import ProgressCallback, wait_until_ready
from miniclusters.backends.local import cgroups, netns, plan, process
from miniclusters.backends.local.state import ClusterRecord, PodRecord, StateStore
from miniclusters.backends.policy import check_scale, removed_indexes
from miniclusters.render.broker_config import render_broker_toml
from miniclusters.render.entrypoint import render_entrypoint
from miniclusters.render.layout import BROKER_TOML, CURVE_FILE, ENTRYPOINT
from miniclusters.render.objects import certificate_for

UNPRIVILEGED_ENV = "MINICLUSTERS_LOCAL_UNPRIVILEGED"
WEIGHT_FORMULA_ENV = "MINICLUSTERS_CGROUP_V2_WEIGHT"
HOSTNAME_ENV = "MINICLUSTERS_LOCAL_HOSTNAME"
LATENCY = re.compile(r"^\d+(\.\d+)?(us|ms|s)$")
SOCKET_PATH_MAX = 107
LEAD_ASK_TIMEOUT = 20.0
NAMESPACE = "local"

# In process mode every broker shares the machine's hostname: this `flux` tells `flux start` which pod it is.
HOSTNAME_SHIM = """#!/bin/sh
# miniclusters local backend (unprivileged): pods share this machine's hostname, so tell the broker its pod name.
case "$1" in
  start|broker) sub="$1"; shift; exec {flux} "$sub" --hostname="${{{env}}}" "$@" ;;
esac
exec {flux} "$@"
"""


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


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


class LocalBackend:
    """Backend running every pod on this machine (see the module docstring)."""

    name = "local"

    def __init__(
        self,
        namespace: str | None = None,
        progress: ProgressCallback | None = None,
        latency: str | None = None,
        unprivileged: bool | None = None,
        state_dir: Path | str | None = None,
        weight_formula: str | None = None,
        notify: Callable[[str], None] = _stderr,
        poll_interval: float = 0.3,
    ) -> None:
        if namespace:
            raise InvalidRequestError(
                f"--namespace {namespace!r}: the local backend has no namespaces (cluster names are per machine); "
                "drop --namespace or use --backend kubernetes"
            )
        if latency is not None and not LATENCY.match(latency):
            raise InvalidRequestError(f"--latency {latency!r}: expected a duration like 2ms, 500us or 0.1s")
        formula = weight_formula or os.environ.get(WEIGHT_FORMULA_ENV) or "nonlinear"
        if formula not in ("linear", "nonlinear"):
            raise InvalidRequestError(f"${WEIGHT_FORMULA_ENV}={formula!r}: expected linear or nonlinear")
        self.store = StateStore(Path(state_dir) if state_dir else None)
        self.progress = progress
        self.latency = latency
        forced = unprivileged if unprivileged is not None else os.environ.get(UNPRIVILEGED_ENV, "") not in ("", "0")
        self.privileged = os.geteuid() == 0 and not forced and netns.available()
        self.weight_formula = formula
        self.notify = notify
        self.poll_interval = poll_interval

    # ------------------------------------------------------------------ helpers
    def _load(self, name: str) -> tuple[ClusterRecord, MiniCluster]:
        if not self.store.exists(name):
            raise NotFoundError(
                f"MiniCluster {name!r} not found on this machine (state directory {self.store.root}); "
                "see `minicluster list`"
            )
        record = self.store.load(name)
        try:
            mc = load_minicluster(self.store.load_spec(name), source=f"local MiniCluster {name}")
        except SpecError as exc:
            raise BackendError(f"stored spec of MiniCluster {name!r} is unreadable: {exc}") from None
        return record, mc

    def _driver(self, record: ClusterRecord) -> cgroups.CgroupDriver | None:
        if record.cgroup_version is None or record.cgroup_root is None:
            return None
        return cgroups.CgroupDriver(record.cgroup_version, Path(record.cgroup_root), record.weight_formula)

    def _addressing(self, record: ClusterRecord) -> plan.Addressing:
        return plan.addressing_for(record.slot, loopback=record.mode != "netns")

    def _pod_environment(self, record: ClusterRecord, pod: PodRecord) -> dict[str, str]:
        base = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("FLUX_", "MINICLUSTERS_LOCAL_", "MINICLUSTER_")) and k != "JOB_COMPLETION_INDEX"
        }
        base.update(record.environment)
        cluster_dir = self.store.cluster_dir(record.name)
        base.update(
            JOB_COMPLETION_INDEX=str(pod.index),
            MINICLUSTER_CONFIG_DIR=str(cluster_dir / "config"),
            MINICLUSTER_RUN_DIR=str(self.store.pod_dir(record.name, pod.index) / "run"),
            MINICLUSTER_BROKER_DIR=record.broker_dir,
            HOSTNAME=pod.hostname,
            PYTHONUNBUFFERED="1",
            TMPDIR=str(self.store.pod_dir(record.name, pod.index) / "tmp"),
        )
        if record.mode != "netns":
            base[HOSTNAME_ENV] = pod.hostname
        return base

    def _tag(self, record: ClusterRecord, index: int) -> str:
        return process.tag_for(self.store.cluster_dir(record.name), index)

    # ------------------------------------------------------------------ create
    def _check_supported(self, mc: MiniCluster) -> None:
        spec = mc.spec
        if spec.flux.flavour != "builtin":
            raise InvalidRequestError(
                "spec.flux.flavour: the local backend runs the built-in broker only (flavour 'flux' needs the "
                "Flux Operator's flux-view image); use --backend kubernetes or flavour builtin"
            )
        if spec.flux.broker_config:
            raise InvalidRequestError(
                "spec.flux.brokerConfig: a hand-written broker config names Kubernetes paths and DNS names; the "
                "local backend renders its own (drop the field to run locally)"
            )
        if spec.flux.bursting.hostlist:
            raise InvalidRequestError("spec.flux.bursting.hostlist: bursting is not supported by the local backend")
        if spec.effective_max_size > plan.MAX_LOCAL_PODS:
            raise InvalidRequestError(
                f"spec.maxSize={spec.effective_max_size}: the local backend runs at most {plan.MAX_LOCAL_PODS} pods"
            )

    def create(self, mc: MiniCluster, options: CreateOptions | None = None) -> ClusterStatus:
        """Write the rendered config, start pods 0..size-1, wait until every broker has joined the lead."""
        options = options or CreateOptions()
        self._check_supported(mc)
        if options.render.flavour and options.render.flavour != "builtin":
            raise InvalidRequestError("--flavour: the local backend runs the built-in broker only")
        with self.store.lock():
            record = self._prepare(mc, options)
            try:
                for index in range(mc.spec.size):
                    self._start_pod(record, index)
                    self.store.save(record)
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
            clash = next((n for n in netns.list_namespaces() if n.startswith(f"mc-{name}-")), None)
            if clash:
                raise InvalidRequestError(
                    f"MiniCluster {name!r}: network namespace {clash!r} already exists on this machine "
                    f"(another state directory, or a crashed run: remove it with `ip netns del {clash}`)"
                )
        if self.latency:
            if mode != "netns":
                raise InvalidRequestError(
                    f"--latency {self.latency}: network emulation needs root (pods in their own network "
                    "namespaces); unprivileged pods share the loopback interface"
                )
            ok, why = netem_probe()
            if not ok:
                raise InvalidRequestError(
                    f"--latency {self.latency}: the netem qdisc is unavailable on this kernel ({why}); "
                    "install/load sch_netem (e.g. linux-modules-extra) or drop --latency"
                )
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

        taken = [self.store.load(other).slot for other in self.store.names()]
        try:
            addressing = plan.choose_slot(taken, netns.routes_in_use() if mode == "netns" else [], mode != "netns")
        except RuntimeError as exc:
            raise BackendError(f"MiniCluster {name!r}: {exc}") from None
        driver = cgroups.detect(v2_formula=self.weight_formula) if mode == "netns" else None
        if mode == "netns" and driver is None:
            self.notify("notice: no writable cgroup cpu controller: pod CPU weights are approximated with nice levels")
        if mode == "process":
            self.notify(
                "notice: not root (or unprivileged mode): pods are plain processes on 127.213.x addresses sharing "
                "this machine's network, hostname and CPU cgroup (CPU weight approximated with nice levels)"
            )
        flux = find_flux()
        cluster_dir = self.store.cluster_dir(name)
        broker_dir = flux.parent.parent
        if mode == "process":
            broker_dir = cluster_dir / "broker"
            (broker_dir / "bin").mkdir(parents=True, exist_ok=True)
            shim = broker_dir / "bin" / "flux"
            shim.write_text(HOSTNAME_SHIM.format(flux=str(flux), env=HOSTNAME_ENV))
            shim.chmod(0o755)

        record = ClusterRecord(
            name=name,
            mode=mode,
            slot=addressing.slot,
            size=mc.spec.size,
            max_size=mc.spec.effective_max_size,
            min_size=mc.spec.min_size,
            broker_dir=str(broker_dir),
            cwd=os.getcwd(),
            environment=dict(runner.environment) | restful_credentials(mc),
            cgroup_version=driver.version if driver else None,
            cgroup_root=str(driver.root) if driver else None,
            weight_formula=self.weight_formula,
            latency=self.latency,
            cpu_milli=cpu,
            cpu_limit_milli=cpu_limit,
        )
        for index in range(mc.spec.size):
            record.pods[index] = PodRecord(
                index=index,
                hostname=plan.pod_name(name, index),
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
                    "host": plan.pod_name(mc.name, i),
                    "bind": f"tcp://{addressing.pod_address(i)}:{port}",
                    "connect": f"tcp://{addressing.pod_address(i)}:{port}",
                }
                for i in range(mc.spec.effective_max_size)
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
                hostname=plan.pod_name(record.name, index),
                address=str(self._addressing(record).pod_address(index)),
                cpu_milli=record.cpu_milli,
                cpu_limit_milli=record.cpu_limit_milli,
                netns=plan.netns_name(record.name, index) if record.mode == "netns" else None,
            )
            record.pods[index] = pod
        addressing = self._addressing(record)
        try:
            if record.mode == "netns" and pod.netns:
                netns.create_pod_network(
                    addressing, pod.netns, index, addressing.hosts_file(record.name, record.max_size), pod.hostname
                )
                if record.latency:
                    netns.add_latency(pod.netns, record.latency)
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
            launch = process.Launch(
                tag=self._tag(record, index),
                pod_dir=self.store.pod_dir(record.name, index),
                entrypoint=self.store.cluster_dir(record.name) / ENTRYPOINT,
                environment=self._pod_environment(record, pod),
                cwd=record.cwd,
                netns=pod.netns if record.mode == "netns" else None,
                hostname=pod.hostname,
                cgroup_procs=procs,
                nice=nice,
            )
            child = process.start(launch)
        except (netns.NetworkError, cgroups.CgroupError, OSError) as exc:
            raise BackendError(f"starting pod {pod.hostname} (index {index}): {exc}") from None
        pod.pid = child.pid
        pod.start_ticks = process.start_ticks(child.pid)
        pod.started_at = time.time()

    # ------------------------------------------------------------------ stop
    def _stop_pod(self, record: ClusterRecord, index: int, grace: float = 3.0) -> None:
        pod = record.pods.get(index)
        tag = self._tag(record, index)
        if pod is not None:
            process.stop(pod.pid, pod.start_ticks, tag, grace)
        driver = self._driver(record)
        if driver is not None:
            driver.remove(record.name, index)
        if record.mode == "netns":
            netns.delete_pod_network(plan.netns_name(record.name, index), record.slot, index)

    def _teardown(self, record: ClusterRecord) -> None:
        """Stop every pod (all at once: SIGTERM everything, then wait), remove cgroups, namespaces, bridge, state."""
        cluster_dir = self.store.cluster_dir(record.name)
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
        if record.mode == "netns":
            netns.delete_bridge(record.slot)
        self.store.remove(record.name)

    def delete(self, name: str) -> None:
        with self.store.lock():
            if not self.store.exists(name):
                raise NotFoundError(f"MiniCluster {name!r} not found on this machine (state {self.store.root})")
            self._teardown(self.store.load(name))

    # ------------------------------------------------------------------ status
    def _pod_status(self, record: ClusterRecord, pod: PodRecord, ranks_up: tuple[int, ...] | None) -> PodStatus:
        running = process.alive(pod.pid, pod.start_ticks)
        code = process.exit_code(self.store.pod_dir(record.name, pod.index))
        if running:
            phase = "Running"
        elif pod.pid is None:
            phase = "Pending"
        elif code == 0:
            phase = "Succeeded"
        else:
            phase = "Failed"
        ready = running and (ranks_up is None or pod.index in ranks_up)
        desired = format_millicores(pod.cpu_milli) if pod.cpu_milli else None
        return PodStatus(
            index=pod.index,
            name=pod.hostname,
            phase=phase,
            ready=ready,
            cpu_desired=desired,
            cpu_allocated=desired,
            cpu_actual=self._actual_cpu(record, pod) if running else None,
            node=f"{pod.address}" + (f" ({pod.netns})" if pod.netns else ""),
            exit_code=code if not running else None,
        )

    def _actual_cpu(self, record: ClusterRecord, pod: PodRecord) -> str | None:
        """What the kernel applies now, converted back to a request (cgroup weight, or nice level)."""
        driver = self._driver(record)
        if driver is not None:
            value = driver.read_weight(record.name, pod.index)
            if value is None:
                return None
            milli = driver.milli_for(value, pod.cpu_milli)
        else:
            nice = process.current_nice(pod.pid)
            if nice is None:
                return None
            milli = pod.cpu_milli if cpu_model.milli_to_nice(pod.cpu_milli) == nice else cpu_model.nice_to_milli(nice)
        return format_millicores(milli) if milli else "0"

    def kernel_weight(self, name: str, index: int) -> tuple[str, int | None]:
        """(knob, value) the kernel holds for a pod now: ("cpu.shares", 512), ("cpu.weight", 59) or ("nice", 3)."""
        record, _ = self._load(name)
        pod = self._require_pod(record, index)
        driver = self._driver(record)
        if driver is not None:
            return driver.knob, driver.read_weight(name, index)
        return "nice", process.current_nice(pod.pid)

    def status(self, name: str) -> ClusterStatus:
        record, _mc = self._load(name)
        lead = record.pods.get(0)
        lead_running = lead is not None and process.alive(lead.pid, lead.start_ticks)
        ranks_up = ranks_down = None
        lead_error = None
        if lead_running:
            try:
                ranks_up, ranks_down = self._ask_lead(record)
            except BackendError as exc:
                lead_error = str(exc)
        pods = tuple(self._pod_status(record, pod, ranks_up) for _, pod in sorted(record.pods.items()))
        lead_status = pods[0] if pods and pods[0].index == 0 else None
        finished = lead_status is not None and lead_status.phase in ("Succeeded", "Failed")
        succeeded = (lead_status.phase == "Succeeded") if finished and lead_status else None
        if not lead_running and not finished:
            lead_error = "the lead pod (index 0) is not running"
        isolation = (
            (f"netns, cgroup v{record.cgroup_version}" if record.cgroup_version else "netns, nice levels")
            if record.mode == "netns"
            else "processes on loopback addresses, nice levels (not isolated)"
        )
        conditions = [ClusterCondition("Isolation", "True", record.mode, isolation)]
        if record.latency:
            conditions.append(ClusterCondition("NetworkEmulation", "True", "netem", f"{record.latency} per packet"))
        failed = [p for p in pods if p.phase == "Failed" and p.index != 0]
        if failed:
            names = ", ".join(f"{p.name} (exit {p.exit_code if p.exit_code is not None else 'killed'})" for p in failed)
            conditions.append(ClusterCondition("Degraded", "True", "PodFailed", names))
        if lead_running and ranks_up is not None:
            queue = self._queue_summary(record)
            if queue:
                conditions.append(ClusterCondition("Queue", "True", "Jobs", queue))
        return ClusterStatus(
            name=name,
            namespace=NAMESPACE,
            size=record.size,
            max_size=record.max_size,
            min_size=record.min_size,
            pods=pods,
            ranks_up=ranks_up,
            ranks_down=ranks_down,
            conditions=tuple(conditions),
            finished=finished,
            succeeded=succeeded,
            lead_error=lead_error,
        )

    def _run(self, record: ClusterRecord, index: int, argv: list[str], timeout: float) -> ExecResult:
        pod = self._require_pod(record, index)
        if not process.alive(pod.pid, pod.start_ticks):
            raise BackendError(f"pod {pod.hostname} (index {index}) is not running; see `minicluster status`")
        env = self._pod_environment(record, pod)
        env[process.TAG_VARIABLE] = self._tag(record, index)
        env["FLUX_URI"] = f"local://{self._broker_socket(record, index)}"
        env["PATH"] = f"{record.broker_dir}/bin{os.pathsep}{env.get('PATH', '')}"
        driver = self._driver(record)
        procs = driver.procs_file(record.name, index) if driver else None
        try:
            done = process.run_in_pod(argv, env, record.cwd, pod.pid, record.mode == "netns", procs, timeout)
        except FileNotFoundError as exc:
            return ExecResult(127, "", f"{exc.filename}: command not found\n")
        except OSError as exc:
            raise BackendError(f"running {argv[0]!r} in pod {pod.hostname}: {exc}") from None
        return ExecResult(done.returncode, done.stdout, done.stderr)

    def lead_uri(self, name: str) -> str:
        """FLUX_URI of the lead broker, reachable from this machine without entering the pod (controllers poll it
        without charging the pod's CPU for a `flux` process per look)."""
        record, _ = self._load(name)
        return f"local://{self._broker_socket(record, 0)}"

    def _broker_socket(self, record: ClusterRecord, index: int) -> Path:
        """The pod broker's local socket, under the rundir the entrypoint gives it (-Srundir)."""
        return self.store.pod_dir(record.name, index) / "run" / "rundir" / "local"

    def _ask_lead(self, record: ClusterRecord) -> tuple[tuple[int, ...], tuple[int, ...]]:
        if not self._broker_socket(record, 0).exists():
            raise BackendError("the lead broker is starting (its local socket is not open yet)")
        try:
            result = self._run(record, 0, ["flux", "overlay", "status", "--json"], LEAD_ASK_TIMEOUT)
        except subprocess.TimeoutExpired as exc:
            raise BackendError(f"`flux overlay status` in the lead pod timed out: {exc}") from None
        if result.rc != 0:
            raise BackendError(f"`flux overlay status` in the lead pod exited {result.rc}: {result.stderr.strip()}")
        try:
            return parse_overlay(result.stdout)
        except (ValueError, KeyError) as exc:
            raise BackendError(f"unexpected `flux overlay status` output: {exc}") from None

    def _queue_summary(self, record: ClusterRecord) -> str | None:
        """Job counts by state from the lead (`flux jobs -a`); None while the broker has no job manager."""
        try:
            result = self._run(record, 0, ["flux", "jobs", "-a", "--no-header", "-o", "{state}"], LEAD_ASK_TIMEOUT)
        except (BackendError, subprocess.TimeoutExpired):
            return None
        if result.rc != 0:
            return None
        counts: dict[str, int] = {}
        for line in result.stdout.split():
            counts[line.strip().upper()] = counts.get(line.strip().upper(), 0) + 1
        if not counts:
            return "no jobs"
        return ", ".join(f"{n} {state.lower()}" for state, n in sorted(counts.items()))

    # ------------------------------------------------------------------ scale, resize
    def _require_pod(self, record: ClusterRecord, index: int) -> PodRecord:
        pod = record.pods.get(index)
        if pod is None:
            have = ", ".join(map(str, sorted(record.pods))) or "none"
            raise InvalidRequestError(
                f"MiniCluster {record.name!r} has no pod with index {index} (pod indexes present: {have}; "
                f"size is {record.size})"
            )
        return pod

    def scale(self, name: str, size: int) -> ClusterStatus:
        """Start the missing indexes, or stop the highest ones; the lead (index 0) is never removed."""
        with self.store.lock():
            record, mc = self._load(name)
            check_scale(mc.spec.min_size, mc.spec.effective_max_size, size, name)
            current = record.size
            if size > current:
                try:
                    for index in range(current, size):
                        self._start_pod(record, index)
                        record.size = index + 1
                        self.store.save(record)
                except BaseException:
                    self.store.save(record)
                    raise
            else:
                for index in sorted(removed_indexes(current, size), reverse=True):
                    self._stop_pod(record, index)
                    record.pods.pop(index, None)
                    shutil.rmtree(self.store.pod_dir(name, index), ignore_errors=True)
                    record.size = index
                    self.store.save(record)
            record.size = size
            self.store.save(record)
            spec = self.store.load_spec(name)
            spec["spec"]["size"] = size
            self.store.save_spec(name, spec)
        return self.status(name)

    def resize(self, name: str, index: int, cpu: str) -> ResizeResult:
        """Rewrite the pod's kernel CPU weight in place (cgroup or nice); the pod keeps running, same pids."""
        try:
            milli = cpu_millicores(cpu)
        except ValueError as exc:
            raise InvalidRequestError(f"--cpu: {exc}") from None
        with self.store.lock():
            record, _ = self._load(name)
            pod = self._require_pod(record, index)
            if not process.alive(pod.pid, pod.start_ticks):
                raise InvalidRequestError(
                    f"pod {pod.hostname} (index {index}) is not running; a resize needs a running pod"
                )
            driver = self._driver(record)
            if driver is not None:
                before = driver.read_weight(name, index)
                try:
                    value = driver.set_weight(name, index, milli)
                except cgroups.CgroupError as exc:
                    return ResizeResult(index, pod.hostname, ResizeOutcome.INFEASIBLE, str(exc), cpu)
                message = f"{driver.knob} {before} -> {value} in place (pid {pod.pid} not restarted)"
            else:
                nice = cpu_model.milli_to_nice(milli)
                errors = process.renice(self._tag(record, index), nice)
                if errors:
                    return ResizeResult(
                        index,
                        pod.hostname,
                        ResizeOutcome.INFEASIBLE,
                        f"cannot set nice {nice} (raising priority needs root): {errors[0]}",
                        cpu,
                        self._actual_cpu(record, pod),
                    )
                message = f"nice level {nice} in place (pid {pod.pid} not restarted)"
            pod.cpu_milli = milli
            self.store.save(record)
            return ResizeResult(index, pod.hostname, ResizeOutcome.DONE, message, cpu, self._actual_cpu(record, pod))

    # ------------------------------------------------------------------ exec, logs, list
    def exec(self, name: str, index: int, argv: list[str]) -> ExecResult:
        record, _ = self._load(name)
        self._require_pod(record, index)
        try:
            return self._run(record, index, argv, 3600.0)
        except subprocess.TimeoutExpired:
            raise BackendError(f"`{' '.join(argv)}` in pod index {index} did not finish within an hour") from None

    def logs(self, name: str, index: int = 0, follow: bool = False) -> Iterator[str]:
        record, _ = self._load(name)
        pod = self._require_pod(record, index)
        path = self.store.pod_dir(name, index) / process.LOG_FILE
        pending = ""
        offset = 0
        while True:
            running = process.alive(pod.pid, pod.start_ticks)
            try:
                with open(path, "rb") as handle:
                    handle.seek(offset)
                    chunk = handle.read()
            except FileNotFoundError:
                chunk = b""
            offset += len(chunk)
            pending += chunk.decode(errors="replace")
            *lines, pending = pending.split("\n")
            yield from lines
            if not follow or (not running and not chunk):
                break
            if not chunk:
                time.sleep(0.1)
        if pending:
            yield pending

    def list(self) -> list[ClusterSummary]:
        out = []
        for name in self.store.names():
            try:
                record = self.store.load(name)
            except (OSError, ValueError):
                continue
            alive = [i for i, p in record.pods.items() if process.alive(p.pid, p.start_ticks)]
            lead = record.pods.get(0)
            if lead is not None and not process.alive(lead.pid, lead.start_ticks):
                code = process.exit_code(self.store.pod_dir(name, 0))
                state = "Completed" if code == 0 else "Failed"
            elif len(alive) < record.size:
                state = "Degraded"
            else:
                state = "Running"
            out.append(ClusterSummary(name, NAMESPACE, record.size, len(alive), state))
        return out


def netem_probe() -> tuple[bool, str]:
    return netns.netem_available()
