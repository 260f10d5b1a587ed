"""Reading a podman cluster's pods: one `podman pod ps`, one `podman container inspect`, as PodStatus values
(right after `up` played them, the inspect alone: which pods there are is known).

Pure apart from the Podman handle: the mapping from podman's container state to Kubernetes' pod phases is
`phase_of`, tested without podman.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from elasticity.model.node import Node
from miniclusters.api.quantity import format_millicores
from miniclusters.backends.base import PodStatus
from miniclusters.backends.podman.engine import Podman
from miniclusters.backends.podman.pods import CLUSTER_LABEL, cluster_of, container_name, pod_name
from miniclusters.render.layout import NAME_LABEL

NODE_NAME = "podman"


class ContainerState(TypedDict, total=False):
    Status: str
    Pid: int
    ExitCode: int
    StartedAt: str
    CgroupPath: str
    StoppedByUser: bool


class RestartPolicy(TypedDict, total=False):
    Name: str


class HostConfig(TypedDict, total=False):
    RestartPolicy: RestartPolicy


class ContainerMount(TypedDict, total=False):
    Destination: str
    Source: str


class InspectedContainer(TypedDict, total=False):
    """`podman container inspect`'s document of one container: the fields we read."""

    Id: str
    Name: str
    State: ContainerState
    HostConfig: HostConfig
    RestartCount: int
    Mounts: list[ContainerMount]


def this_machine() -> Node:
    """The one node every pod runs on: this machine's CPUs (what a resize is checked against, as the kubelet
    checks a node's capacity)."""
    return Node(NODE_NAME, (os.cpu_count() or 1) * 1000)


CPU_SHARES_MIN = 2
CGROUP_ROOT = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class PodmanPod:
    """One pod as podman reports it; `container` is the application container's inspect document (None while
    the init container still runs: `kube play` creates the application container after it)."""

    index: int
    name: str
    pod_state: str
    container: InspectedContainer | None
    stopped_by_user: bool = False
    """Its container was stopped by hand (`podman kill`, `podman stop`): podman will not restart it."""

    @property
    def pid(self) -> int | None:
        state = (self.container or {}).get("State", {})
        return int(state["Pid"]) if state.get("Pid") else None

    @property
    def cpu_shares(self) -> int | None:
        """The container's CPU weight as the kernel holds it (podman 4.3's inspect keeps the creation value
        after `podman update`): cgroup v1 cpu.shares, or v2 cpu.weight mapped back to shares."""
        path = (self.container or {}).get("State", {}).get("CgroupPath")
        if not path or self.pid is None:
            return None
        return read_cpu_shares(str(path))


def read_cpu_shares(cgroup_path: str, root: Path = CGROUP_ROOT) -> int | None:
    v1 = root / "cpu" / cgroup_path.lstrip("/") / "cpu.shares"
    v2 = root / cgroup_path.lstrip("/") / "cpu.weight"
    try:
        if v1.exists():
            return int(v1.read_text())
        if v2.exists():
            return weight_to_shares(int(v2.read_text()))
    except (OSError, ValueError):
        return None
    return None


CONMON_CGROUPS = ("pids/libpod_parent/{pod}/conmon", "libpod_parent/{pod}/conmon")
"""Where podman (cgroupfs manager, v1 or v2) puts a pod's conmon processes and the cleanups they start."""


def conmon_processes(pod_ids: list[str], root: Path = CGROUP_ROOT) -> int:
    """How many processes the pods' conmon cgroups still hold (0 where there is no such cgroup: systemd)."""
    count = 0
    for pod in pod_ids:
        for pattern in CONMON_CGROUPS:
            try:
                count += len((root / pattern.format(pod=pod) / "cgroup.procs").read_text().split())
                break
            except OSError:
                continue
    return count


def weight_to_shares(weight: int) -> int:
    """cgroup v2 cpu.weight back to shares (the inverse of the linear mapping runc and crun used before 1.3.2)."""
    return 2 + (weight - 1) * 262142 // 9999


def shares_to_millicores(shares: int) -> int:
    """The kubelet's cgroup v1 mapping inverted: shares = milli * 1024 / 1000."""
    return (shares * 1000 + 1023) // 1024 if shares > CPU_SHARES_MIN else 0


def millicores_to_shares(milli: int) -> int:
    """cpu.shares for a CPU request, as the kubelet writes it (min 2, max 262144)."""
    return max(CPU_SHARES_MIN, min(262144, milli * 1024 // 1000))


def phase_of(pod: PodmanPod) -> tuple[str, int | None, str | None]:
    """(Kubernetes pod phase, exit code, reason) of a podman pod."""
    if pod.container is None:
        return "Pending", None, "PodInitializing"
    state = pod.container.get("State", {})
    status = str(state.get("Status", "unknown"))
    if status in ("running", "paused"):
        return "Running", None, None
    if status in ("exited", "stopped"):
        code = int(state.get("ExitCode", 0))
        if code == 0:
            return "Succeeded", 0, None
        if _restarted_on_failure(pod.container) and not pod.stopped_by_user:
            return "Running", None, "CrashLoopBackOff"  # podman restarts it: the pod is not done (OnFailure)
        return "Failed", code, "Error"  # and nothing restarts a container stopped by hand: it stays down
    if status in ("created", "configured", "initialized"):
        return "Pending", None, "ContainerCreating"
    return "Unknown", None, status


def _restarted_on_failure(container: InspectedContainer) -> bool:
    return bool(container.get("HostConfig", {}).get("RestartPolicy", {}).get("Name") == "on-failure")


def pod_status(
    pod: PodmanPod,
    desired: int | None = None,
    ranks_up: tuple[int, ...] | None = None,
    restarts: int | None = None,
) -> PodStatus:
    """`desired`: the pod's recorded CPU request in millicores (None: none recorded); `ranks_up`: the ranks the
    lead reports joined (None: not known), without which a running pod is not ready (its broker is not serving,
    as the local backend says); `restarts`: the count that never goes down (restarts.py; None: podman's)."""
    phase, code, reason = phase_of(pod)
    shares = pod.cpu_shares
    cpu = format_millicores(shares_to_millicores(shares)) if shares else None
    want = format_millicores(desired) if desired is not None else None
    return PodStatus(
        index=pod.index,
        name=pod.name,
        phase=phase,
        ready=phase == "Running" and reason is None and (ranks_up is None or pod.index in ranks_up),
        cpu_desired=want,
        cpu_allocated=want if cpu is not None else None,
        cpu_actual=cpu,
        node=NODE_NAME,
        exit_code=code,
        restarts=restarts if restarts is not None else int((pod.container or {}).get("RestartCount", 0)),
        reason=reason,
    )


def read_pods(podman: Podman, cluster: str, runner: str) -> list[PodmanPod]:
    """Every pod of `cluster`, by index, with its application container's inspect document."""
    listed = podman.json(
        [
            "pod",
            "ps",
            "--filter",
            f"label={NAME_LABEL}={cluster}",
            "--filter",
            f"label={CLUSTER_LABEL}=podman",
            "--format",
            "json",
        ],
        f"listing the pods of MiniCluster {cluster!r}",
    )
    indexes: dict[int, str] = {}
    for pod in listed or []:
        found = cluster_of(pod.get("Labels") or {})
        if found is not None and found[0] == cluster:
            indexes[found[1]] = str(pod.get("Status", ""))
    return _with_containers(podman, cluster, runner, indexes)


def inspect_pods(podman: Podman, cluster: str, runner: str, indexes: Iterable[int]) -> list[PodmanPod]:
    """The pods of `indexes`, which `up` has just played (so no `pod ps` asks which there are): one `container
    inspect`; a pod whose container is missing reads as still initialising."""
    return _with_containers(podman, cluster, runner, dict.fromkeys(indexes, ""))


def _with_containers(podman: Podman, cluster: str, runner: str, indexes: dict[int, str]) -> list[PodmanPod]:
    """The pods of `indexes` (index -> podman's pod status), each with its application container's document."""
    names = [container_name(cluster, i, runner) for i in sorted(indexes)]
    inspected: dict[str, InspectedContainer] = {}
    if names:
        # Containers may be missing (still initialising): inspect does not stop at the first unknown name.
        answer = podman.run(["container", "inspect", *names], "inspecting containers", check=False)
        for doc in json.loads(answer.stdout or "[]"):
            inspected[str(doc.get("Name", "")).lstrip("/")] = doc
    pods = []
    for i in sorted(indexes):
        doc = inspected.get(container_name(cluster, i, runner))
        pods.append(
            PodmanPod(i, pod_name(cluster, i), indexes[i], doc, doc is not None and stopped_by_user(podman, doc))
        )
    return pods


def mount_source(container: InspectedContainer | None, destination: str) -> str | None:
    """Where on this machine the container's mount at `destination` is (None: no such mount)."""
    mounts = (container or {}).get("Mounts", [])
    return next((m.get("Source") for m in mounts if m.get("Destination") == destination), None)


def stopped_by_user(podman: Podman, container: InspectedContainer) -> bool:
    """Whether a container that exited non-zero under on-failure was stopped by hand, which is why podman does
    not restart it: newer podman says so in inspect (State.StoppedByUser); 4.3 only in its event log, as a kill
    or stop since the container's last start. Asked only of such a container (one `podman events`)."""
    state = container.get("State", {})
    if state.get("Status") not in ("exited", "stopped") or not state.get("ExitCode"):
        return False
    if not _restarted_on_failure(container):
        return False
    if "StoppedByUser" in state:
        return bool(state["StoppedByUser"])
    argv = ["events", "--stream=false", "--filter", f"container={container.get('Id', '')}"]
    argv += ["--filter", "event=kill", "--filter", "event=stop", "--format", "{{.Status}}"]
    if state.get("StartedAt"):
        argv += ["--since", str(state["StartedAt"])]
    answer = podman.run(argv, "reading podman's events", check=False, timeout=30)
    return answer.returncode == 0 and bool(answer.stdout.split())


def cluster_names(podman: Podman) -> list[str]:
    """Clusters that have pods in podman (whatever the state directory knows)."""
    listed = podman.json(["pod", "ps", "--filter", f"label={CLUSTER_LABEL}=podman", "--format", "json"], "listing pods")
    return sorted({found[0] for pod in listed or [] if (found := cluster_of(pod.get("Labels") or {}))})
