"""What every part of the local backend shares: its settings, the state store, and reaching into a pod.

Each pod is a supervised process tree running the rendered entrypoint with JOB_COMPLETION_INDEX, as in an
Indexed Job. The backend is made of parts, each owning its own state and composed by backend.py: this context
(settings, the store), prepare.py (checking a spec, writing a cluster's files), pods.py (one pod's start and
stop), lifecycle.py (create, teardown, delete), observe.py (status, the ClusterView), actuate.py (scale, resize:
the actuator) and bursts.py (bursts and the burst service). tests/local/test_local_parts.py checks the ownership.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from miniclusters.api import SpecError, load_minicluster
from miniclusters.api.spec import MiniCluster
from miniclusters.backends.base import BackendError, ExecResult, NotFoundError, no_such_pod
from miniclusters.backends.local import cgroups, cpusets, plan, process
from miniclusters.backends.local.state import ClusterRecord, PodRecord, StateStore
from miniclusters.backends.wait import ProgressCallback

UNPRIVILEGED_ENV = "MINICLUSTERS_LOCAL_UNPRIVILEGED"
WEIGHT_FORMULA_ENV = "MINICLUSTERS_CGROUP_V2_WEIGHT"
HOSTNAME_ENV = "MINICLUSTERS_LOCAL_HOSTNAME"
SOCKET_PATH_MAX = 107
LEAD_ASK_TIMEOUT = 20.0
NAMESPACE = "local"
BACKEND_NAME = "local"


def deleting_message(name: str) -> str:
    return (
        f"MiniCluster {name!r} is being deleted (a teardown was cut short); "
        f"`minicluster down {name}` or `minicluster up` finishes it"
    )


def notify_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class LocalSettings:
    """How this backend was opened: checked once, read by every part."""

    privileged: bool
    latency: str | None
    weight_formula: str
    poll_interval: float
    progress: ProgressCallback | None
    notify: Callable[[str], None]


class LocalContext:
    """The settings, the state store and the helpers every part of the local backend uses (it holds no cluster
    state of its own: that lives in the store)."""

    def __init__(self, store: StateStore, settings: LocalSettings) -> None:
        self._store = store
        self._settings = settings

    @property
    def store(self) -> StateStore:
        return self._store

    @property
    def settings(self) -> LocalSettings:
        return self._settings

    def notify(self, message: str) -> None:
        self._settings.notify(message)

    def load(self, name: str, deleting_ok: bool = False) -> tuple[ClusterRecord, MiniCluster]:
        """The record and spec of a cluster; one being deleted is gone for everything but looking at it."""
        if not self._store.exists(name):
            raise NotFoundError(
                f"MiniCluster {name!r} not found on this machine (state directory {self._store.root}); "
                "see `minicluster list`"
            )
        record = self._store.load(name)
        if record.deleting and not deleting_ok:
            raise NotFoundError(deleting_message(name))
        try:
            mc = load_minicluster(self._store.load_spec(name), source=f"local MiniCluster {name}")
        except SpecError as exc:
            raise BackendError(f"stored spec of MiniCluster {name!r} is unreadable: {exc}") from None
        return record, mc

    def driver(self, record: ClusterRecord) -> cgroups.CgroupDriver | None:
        if record.cgroup_version is None or record.cgroup_root is None:
            return None
        return cgroups.CgroupDriver(record.cgroup_version, Path(record.cgroup_root), record.weight_formula)

    def cpuset_driver(self, record: ClusterRecord) -> cpusets.CpusetDriver | None:
        """The pods' cpusets when the spec pins them (exclusive CPUs)."""
        if not record.exclusive_cores or record.cpuset_version is None or record.cpuset_root is None:
            return None
        return cpusets.CpusetDriver(record.cpuset_version, Path(record.cpuset_root))

    def addressing(self, record: ClusterRecord) -> plan.Addressing:
        return plan.addressing_for(record.slot, loopback=record.mode != "netns")

    def pod_environment(self, record: ClusterRecord, pod: PodRecord) -> dict[str, str]:
        base = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("FLUX_", "MINICLUSTERS_LOCAL_", "MINICLUSTER_")) and k != "JOB_COMPLETION_INDEX"
        }
        base.update(record.environment)
        cluster_dir = self._store.cluster_dir(record.name)
        base.update(
            JOB_COMPLETION_INDEX=str(pod.index),
            MINICLUSTER_CONFIG_DIR=str(cluster_dir / "config"),
            MINICLUSTER_RUN_DIR=str(self._store.pod_dir(record.name, pod.index) / "run"),
            MINICLUSTER_BROKER_DIR=record.broker_dir,
            HOSTNAME=pod.hostname,
            PYTHONUNBUFFERED="1",
            TMPDIR=str(self._store.pod_dir(record.name, pod.index) / "tmp"),
        )
        if record.program_path:
            base["PATH"] = f"{record.program_path}{os.pathsep}{base.get('PATH', os.defpath)}"
        if record.mode != "netns":
            base[HOSTNAME_ENV] = pod.hostname
        return base

    def tag(self, record: ClusterRecord, index: int) -> str:
        return process.tag_for(self._store.cluster_dir(record.name), index)

    def require_pod(self, record: ClusterRecord, index: int) -> PodRecord:
        pod = record.pods.get(index)
        if pod is None:
            raise no_such_pod(record.name, index, record.pods, record.size)
        return pod

    def run(self, record: ClusterRecord, index: int, argv: list[str], timeout: float) -> ExecResult:
        pod = self.require_pod(record, index)
        if not process.alive(pod.pid, pod.start_ticks):
            raise BackendError(f"pod {pod.hostname} (index {index}) is not running; see `minicluster status`")
        env = self.pod_environment(record, pod)
        env[process.TAG_VARIABLE] = self.tag(record, index)
        env["FLUX_URI"] = f"local://{self.broker_socket(record, index)}"
        env["PATH"] = f"{record.broker_dir}/bin{os.pathsep}{env.get('PATH', '')}"
        driver = self.driver(record)
        procs = driver.procs_file(record.name, index) if driver else None
        pinned = self.cpuset_driver(record)
        pinned_procs = pinned.procs_file(record.name, index) if pinned else None
        try:
            done = process.run_in_pod(
                argv, env, record.cwd, pod.pid, record.mode == "netns", procs, timeout, cpuset_procs=pinned_procs
            )
        except FileNotFoundError as exc:
            return ExecResult(127, "", f"{exc.filename}: command not found\n")
        except OSError as exc:
            raise BackendError(f"running {argv[0]!r} in pod {pod.hostname}: {exc}") from None
        return ExecResult(done.returncode, done.stdout, done.stderr)

    def lead_uri(self, name: str) -> str | None:
        """FLUX_URI of the lead broker, reachable from this machine without entering the pod (controllers poll it
        without charging the pod's CPU for a `flux` process per look); None when the lead runs flux-core (the
        `flux` flavour), whose socket does not speak our client's protocol: callers ask through the pod instead
        (each such RPC waited out its whole timeout, 5 s per `minicluster status`)."""
        record, _ = self.load(name)
        if record.flavour != "builtin":
            return None
        return f"local://{self.broker_socket(record, 0)}"

    def broker_socket(self, record: ClusterRecord, index: int) -> Path:
        """The pod broker's local socket in the rundir the entrypoint gives it (-Srundir): `local-<rank>` under
        flux-core, `local` under the built-in broker; the first name when neither exists yet."""
        rundir = self._store.pod_dir(record.name, index) / "run" / "rundir"
        names = (f"local-{index}", "local")
        for name in names:
            if (rundir / name).exists():
                return rundir / name
        return rundir / names[0]
