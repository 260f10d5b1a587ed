"""Reading a podman cluster's pods: one `podman pod ps`, one `podman container inspect`, as PodStatus values.

Pure apart from the Podman handle: the mapping from podman's container state to Kubernetes' pod phases is
`phase_of`, tested without podman.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from miniclusters.api.quantity import format_millicores
from miniclusters.backends.base import PodStatus
from miniclusters.backends.podman.engine import Podman
from miniclusters.backends.podman.pods import CLUSTER_LABEL, cluster_of, container_name, pod_name
from miniclusters.render.layout import NAME_LABEL

CPU_SHARES_MIN = 2


@dataclass(frozen=True)
class PodmanPod:
    """One pod as podman reports it; `container` is the application container's inspect document (None while
    the init container still runs: `kube play` creates the application container after it)."""

    index: int
    name: str
    pod_state: str
    container: dict[str, Any] | None

    @property
    def pid(self) -> int | None:
        state = (self.container or {}).get("State", {})
        return int(state["Pid"]) if state.get("Pid") else None

    @property
    def cpu_shares(self) -> int | None:
        shares = (self.container or {}).get("HostConfig", {}).get("CpuShares")
        return int(shares) if shares else None


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
        return ("Succeeded", 0, None) if code == 0 else ("Failed", code, "Error")
    if status in ("created", "configured", "initialized"):
        return "Pending", None, "ContainerCreating"
    return "Unknown", None, status


def pod_status(pod: PodmanPod) -> PodStatus:
    phase, code, reason = phase_of(pod)
    shares = pod.cpu_shares
    cpu = format_millicores(shares_to_millicores(shares)) if shares else None
    return PodStatus(
        index=pod.index,
        name=pod.name,
        phase=phase,
        ready=phase == "Running",
        cpu_desired=cpu,
        cpu_allocated=cpu,
        cpu_actual=cpu,
        node="podman",
        exit_code=code,
        restarts=int((pod.container or {}).get("RestartCount", 0)),
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
    names = [container_name(cluster, i, runner) for i in sorted(indexes)]
    inspected: dict[str, dict[str, Any]] = {}
    if names:
        # Containers may be missing (still initialising): inspect does not stop at the first unknown name.
        answer = podman.run(["container", "inspect", *names], "inspecting containers", check=False)
        for doc in json.loads(answer.stdout or "[]"):
            inspected[str(doc.get("Name", "")).lstrip("/")] = doc
    return [
        PodmanPod(i, pod_name(cluster, i), indexes[i], inspected.get(container_name(cluster, i, runner)))
        for i in sorted(indexes)
    ]


def cluster_names(podman: Podman) -> list[str]:
    """Clusters that have pods in podman (whatever the state directory knows)."""
    listed = podman.json(["pod", "ps", "--filter", f"label={CLUSTER_LABEL}=podman", "--format", "json"], "listing pods")
    return sorted({found[0] for pod in listed or [] if (found := cluster_of(pod.get("Labels") or {}))})
