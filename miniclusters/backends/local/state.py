"""Local clusters on disk: one directory per cluster under the user's state directory, one JSON file, one lock.

Everything `status`, `scale` or `down` needs is here, so a cluster started with `up --detach` can be managed
from any other shell. Writes go through a temporary file and a rename, so a reader never sees half a file.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NotRequired, TypedDict, cast

from common import atomic
from miniclusters import lockfile
from miniclusters.workdirs import state_root

STATE_FILE = "state.json"
LOCK_FILE = ".lock"
SPEC_FILE = "minicluster.json"


class PodRecordJson(TypedDict):
    """A PodRecord as state.json keeps it (asdict: the same fields; older files may lack the later ones)."""

    index: int
    hostname: str
    address: str
    cpu_milli: int
    cpu_limit_milli: NotRequired[int | None]
    netns: NotRequired[str | None]
    pid: NotRequired[int | None]
    start_ticks: NotRequired[int | None]
    started_at: NotRequired[float]
    resize_desired: NotRequired[int | None]
    resize_outcome: NotRequired[str]
    resize_message: NotRequired[str]
    cpus: NotRequired[str | None]


class ClusterFieldsJson(TypedDict):
    """A ClusterRecord's own fields as state.json keeps them (older files may lack the later ones)."""

    name: str
    mode: str
    slot: int
    size: int
    max_size: int
    min_size: int
    broker_dir: str
    cwd: str
    environment: NotRequired[dict[str, str]]
    cgroup_version: NotRequired[int | None]
    cgroup_root: NotRequired[str | None]
    weight_formula: NotRequired[str]
    latency: NotRequired[str | None]
    latency_method: NotRequired[str | None]
    flavour: NotRequired[str]
    cpu_milli: NotRequired[int]
    cpu_limit_milli: NotRequired[int | None]
    exclusive_cores: NotRequired[int]
    cpuset_version: NotRequired[int | None]
    cpuset_root: NotRequired[str | None]
    program_path: NotRequired[str | None]
    interactive: NotRequired[bool]
    restart_policy: NotRequired[str]
    backoff_limit: NotRequired[int]
    restart_delay: NotRequired[float]
    created_at: NotRequired[float]
    deleting: NotRequired[bool]


class ClusterRecordJson(ClusterFieldsJson):
    """A ClusterRecord as state.json keeps it: its fields and its pods by index (as strings)."""

    pods: NotRequired[dict[str, PodRecordJson]]


@dataclass
class PodRecord:
    index: int
    hostname: str
    address: str
    cpu_milli: int
    """The CPU request (desired), in millicores; 0 means none (the kubelet then gives the minimum weight)."""
    cpu_limit_milli: int | None = None
    netns: str | None = None
    pid: int | None = None
    start_ticks: int | None = None
    """/proc/<pid>/stat start time, so a recycled pid is never mistaken for the pod."""
    started_at: float = 0.0
    resize_desired: int | None = None
    """A resize the node refused (kept as asked, as the API server keeps a pod's desired resources)."""
    resize_outcome: str = ""
    """"deferred" or "infeasible" while resize_desired is pending (the PodResizePending condition)."""
    resize_message: str = ""
    cpus: str | None = None
    """The cores this pod is pinned to (kernel list format) when the spec asks for exclusive CPUs."""


@dataclass
class ClusterRecord:
    name: str
    mode: str
    """"netns" (root: namespaces, veths, cgroups) or "process" (plain processes on loopback addresses)."""
    slot: int
    size: int
    max_size: int
    min_size: int
    broker_dir: str
    cwd: str
    environment: dict[str, str] = field(default_factory=dict)
    cgroup_version: int | None = None
    cgroup_root: str | None = None
    weight_formula: str = "nonlinear"
    latency: str | None = None
    latency_method: str | None = None
    """How `latency` is applied: "netem" (tc qdisc) or "nfqueue" (the delay line, latency.py)."""
    flavour: str = "builtin"
    """Which broker the pods run: "builtin", or "flux" (real flux-core; broker_dir is then its prefix)."""
    cpu_milli: int = 0
    """The spec's CPU request for every pod (pods added by scale-up start with it)."""
    cpu_limit_milli: int | None = None
    exclusive_cores: int = 0
    """spec.placement.cpus exclusive: whole cores each pod is pinned to (0: shared CPUs)."""
    cpuset_version: int | None = None
    cpuset_root: str | None = None
    program_path: str | None = None
    """The image's programs built for this machine (programs.py), first on every pod's PATH."""
    interactive: bool = False
    """spec.interactive: the lead runs no command of the user's, so it restarts like the followers."""
    restart_policy: str = "OnFailure"
    """The pod template's restartPolicy: followers that fail restart (OnFailure, Never) within backoff_limit."""
    backoff_limit: int = 100
    restart_delay: float = 1.0
    """The supervisor's first back-off before a restart, in seconds (doubled per restart of a pod)."""
    created_at: float = field(default_factory=time.time)
    deleting: bool = False
    """Set (and saved) before a teardown removes anything: a teardown cut short (a second Ctrl-C, a kill) leaves a
    cluster that `list` and `status` show as Deleting and the next `up` or `down` finishes removing."""
    pods: dict[int, PodRecord] = field(default_factory=dict)

    def to_json(self) -> ClusterRecordJson:
        data = cast(ClusterRecordJson, asdict(self))  # the record's own fields, named as they are here
        data["pods"] = {str(k): cast(PodRecordJson, asdict(v)) for k, v in sorted(self.pods.items())}
        return data

    @classmethod
    def from_json(cls, data: ClusterRecordJson) -> ClusterRecord:
        pods = {int(k): PodRecord(**v) for k, v in (data.get("pods") or {}).items()}
        fields = cast(ClusterFieldsJson, {k: v for k, v in data.items() if k != "pods"})
        return cls(**fields, pods=pods)


class StateStore:
    """The directory tree of every local cluster of this user."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root or state_root()

    def cluster_dir(self, name: str) -> Path:
        return self.root / name

    def pod_dir(self, name: str, index: int) -> Path:
        return self.cluster_dir(name) / "pods" / str(index)

    def lead_rest_state_dir(self, name: str) -> Path:
        """The lead's REST state directory, where its web pages read controllers/: under the built-in broker
        `<run>/state/restful` (the entrypoint's `-Sstatedir=<run>/state`, broker/modules/restful.py), beside
        flux-core `<run>/rundir/restful` (broker/rest/server.py's default next to the socket); the flavour comes
        from the stored spec, as in miniclusters/multiplex/event_mirror.py."""
        try:
            flux = self.load_spec(name).get("spec", {}).get("flux", {})
            flavour = flux.get("flavour") if isinstance(flux, dict) else None
        except (OSError, ValueError):
            flavour = None
        return self.pod_dir(name, 0) / "run" / ("rundir" if flavour == "flux" else "state") / "restful"

    def exists(self, name: str) -> bool:
        return (self.cluster_dir(name) / STATE_FILE).is_file()

    def names(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if (p / STATE_FILE).is_file())

    def load(self, name: str) -> ClusterRecord:
        data = json.loads((self.cluster_dir(name) / STATE_FILE).read_text())
        return ClusterRecord.from_json(data)

    def save(self, record: ClusterRecord) -> None:
        directory = self.cluster_dir(record.name)
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        # private: the record may carry the REST API's credentials for the lead pod
        atomic.write_json(directory / STATE_FILE, record.to_json(), mode=0o600)

    def save_spec(self, name: str, spec: dict[str, Any]) -> None:  # open: the record and the spec as stored JSON
        """The spec (it holds the size a scale changes): written whole, so a reader never sees half of it."""
        atomic.write_json(self.cluster_dir(name) / SPEC_FILE, spec)

    def load_spec(self, name: str) -> dict[str, Any]:  # open: the record and the spec as stored JSON
        # open: the record and the spec as stored JSON
        data: dict[str, Any] = json.loads((self.cluster_dir(name) / SPEC_FILE).read_text())
        return data

    def remains(self, name: str) -> bool:
        """A cluster directory without its state file: what a removal cut short left (the cluster is gone)."""
        directory = self.cluster_dir(name)
        return directory.is_dir() and not (directory / STATE_FILE).exists()

    def remove(self, name: str) -> None:
        """The state file first, so the cluster is gone at once even if removing the rest is cut short."""
        directory = self.cluster_dir(name)
        with contextlib.suppress(FileNotFoundError):
            (directory / STATE_FILE).unlink()
        shutil.rmtree(directory, ignore_errors=True)

    @contextlib.contextmanager
    def lock(self, timeout: float = 120.0) -> Iterator[None]:
        """One writer at a time across every shell (create, scale, resize, delete); readers do not lock.

        The last writer out of a store with no cluster left deletes the lock file (`down` leaves none behind)."""
        path = self.root / LOCK_FILE
        try:
            with lockfile.locked(path, timeout):
                try:
                    yield
                finally:
                    if not self.names():
                        lockfile.remove_held(path)
        except lockfile.LockBusy:
            raise TimeoutError(f"another minicluster command holds {path}") from None
