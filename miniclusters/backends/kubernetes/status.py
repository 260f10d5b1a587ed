"""Pure readings of Kubernetes objects: pod index and phase, CPU desired/allocated/actual, resize outcome.

Resize outcome follows in-place pod resize (KEP-1287, beta in 1.33), see
https://kubernetes.io/docs/tasks/configure-pod-container/resize-container-resources/ :
condition PodResizePending with reason Deferred or Infeasible, condition PodResizeInProgress (reason Error on
failure), and status.containerStatuses[].allocatedResources / .resources for what the kubelet applied.
"""

from __future__ import annotations

from collections.abc import Iterable

from broker.refused import EXIT_REFUSED, refusal_reason
from miniclusters.api.quantity import cpu_millicores, parse_quantity
from miniclusters.backends.base import (
    RESIZE_IN_PROGRESS as RESIZE_IN_PROGRESS,  # re-exported: the operator reads them here
)
from miniclusters.backends.base import RESIZE_PENDING as RESIZE_PENDING
from miniclusters.backends.base import PodCondition, PodStatus, ResizeOutcome
from miniclusters.kube_shapes import ContainerStatus, Pod, PodContainer, PodSpec
from miniclusters.render.layout import INDEX_LABEL


def pod_index(pod: Pod) -> int | None:
    meta = pod.get("metadata", {})
    raw = (meta.get("labels") or {}).get(INDEX_LABEL) or (meta.get("annotations") or {}).get(INDEX_LABEL)
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def _container(pod: Pod, container: str | None) -> PodContainer:
    containers = pod.get("spec", {}).get("containers") or [{}]
    none: PodContainer = {}
    if container:
        return next((c for c in containers if c.get("name") == container), none)
    return containers[0].copy()


def _container_status(pod: Pod, container: str | None) -> ContainerStatus:
    statuses = pod.get("status", {}).get("containerStatuses") or []
    name = container or _container(pod, None).get("name")
    none: ContainerStatus = {}
    return next((s for s in statuses if s.get("name") == name), none)


def desired_cpu(pod: Pod, container: str | None = None) -> str | None:
    value = (_container(pod, container).get("resources") or {}).get("requests", {}).get("cpu")
    return None if value is None else str(value)


def allocated_cpu(pod: Pod, container: str | None = None) -> str | None:
    value = (_container_status(pod, container).get("allocatedResources") or {}).get("cpu")
    return None if value is None else str(value)


def actual_cpu(pod: Pod, container: str | None = None) -> str | None:
    value = (_container_status(pod, container).get("resources") or {}).get("requests", {}).get("cpu")
    return None if value is None else str(value)


def same_cpu(a: str | None, b: str | None) -> bool:
    if a is None or b is None:
        return a == b
    return cpu_millicores(a) == cpu_millicores(b)


def conditions(pod: Pod) -> tuple[PodCondition, ...]:
    return tuple(
        PodCondition(
            str(c.get("type", "")), str(c.get("status", "")), str(c.get("reason") or ""), str(c.get("message") or "")
        )
        for c in pod.get("status", {}).get("conditions") or []
    )


def is_ready(pod: Pod) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in conditions(pod))


def exit_code(pod: Pod, container: str | None = None) -> int | None:
    terminated = (_container_status(pod, container).get("state") or {}).get("terminated")
    return None if not terminated else int(terminated.get("exitCode", 0))


def restart_count(pod: Pod, container: str | None = None) -> int:
    """kubectl's RESTARTS: the container's restartCount."""
    count = _container_status(pod, container).get("restartCount")
    return count if isinstance(count, int) else 0


def _init_reason(pod: Pod) -> str | None:
    """An init container that fails or cannot start, as kubectl's STATUS shows it (Init:CrashLoopBackOff): the
    pod's own container never starts then, and its status says only PodInitializing."""
    for status in pod.get("status", {}).get("initContainerStatuses") or []:
        state = status.get("state") or {}
        waiting = (state.get("waiting") or {}).get("reason")
        if waiting and waiting != "PodInitializing":
            return f"Init:{waiting}"
        ended = state.get("terminated") or {}
        if ended and ended.get("exitCode") not in (0, None):
            return f"Init:{ended.get('reason') or 'Error'}"
    return None


def container_reason(pod: Pod, container: str | None = None) -> str | None:
    """Why the container waits or ended (CrashLoopBackOff, Error, OOMKilled, Init:CrashLoopBackOff, ...), as
    kubectl's STATUS shows."""
    init = _init_reason(pod)
    if init is not None:
        return init
    state = _container_status(pod, container).get("state") or {}
    for detail in (state.get("waiting"), state.get("terminated")):
        reason = (detail or {}).get("reason")
        if reason:
            return str(reason)
    return None


def refused(pod: Pod, container: str | None = None) -> str | None:
    """The reason the container's broker refused to start (exit EXIT_REFUSED, broker/refused.py), from its
    termination message (the log's tail: terminationMessagePolicy FallbackToLogsOnError); None when it did not.
    A container running again after such an exit is not refused (its input was fixed)."""
    status = _container_status(pod, container)
    state = status.get("state") or {}
    if "running" in state:
        return None
    ended = state.get("terminated") or (status.get("lastState") or {}).get("terminated") or {}
    if ended.get("exitCode") != EXIT_REFUSED:
        return None
    name = pod.get("metadata", {}).get("name", "")
    return refusal_reason(str(ended.get("message") or "")) or f"exit {EXIT_REFUSED}, see its logs (pod {name})"


def pod_status(pod: Pod, container: str | None = None) -> PodStatus:
    index = pod_index(pod)
    return PodStatus(
        index=-1 if index is None else index,
        name=str(pod.get("metadata", {}).get("name", "")),
        phase=str(pod.get("status", {}).get("phase") or "Pending"),
        ready=is_ready(pod),
        cpu_desired=desired_cpu(pod, container),
        cpu_allocated=allocated_cpu(pod, container),
        cpu_actual=actual_cpu(pod, container),
        node=pod.get("spec", {}).get("nodeName"),
        exit_code=exit_code(pod, container),
        conditions=conditions(pod),
        restarts=restart_count(pod, container),
        reason=container_reason(pod, container),
        refused=refused(pod, container),
    )


def live_pods(pods: Iterable[Pod]) -> list[Pod]:
    """Pods not being deleted, one per index (the newest wins), sorted by index."""
    by_index: dict[int, Pod] = {}
    for pod in pods:
        index = pod_index(pod)
        if index is None or pod.get("metadata", {}).get("deletionTimestamp"):
            continue
        current = by_index.get(index)
        stamp = pod.get("metadata", {}).get("creationTimestamp", "")
        if current is None or stamp >= current.get("metadata", {}).get("creationTimestamp", ""):
            by_index[index] = pod
    return [by_index[i] for i in sorted(by_index)]


def resize_outcome(pod: Pod, cpu: str, container: str | None = None) -> tuple[ResizeOutcome, str]:
    """What the pod's status says about a CPU resize to `cpu`, with the kubelet's message."""
    for condition in conditions(pod):
        if condition.status != "True":
            continue
        if condition.type == RESIZE_PENDING:
            if condition.reason == "Infeasible":
                return ResizeOutcome.INFEASIBLE, condition.message or "the node can never fit this request"
            return ResizeOutcome.DEFERRED, condition.message or "the node cannot fit this request now; will retry"
        if condition.type == RESIZE_IN_PROGRESS:
            if condition.reason == "Error":
                return ResizeOutcome.IN_PROGRESS, f"kubelet reported an error: {condition.message}"
            return ResizeOutcome.IN_PROGRESS, condition.message or "the kubelet is applying the resize"
    if same_cpu(actual_cpu(pod, container), cpu):
        return ResizeOutcome.DONE, f"running with cpu {cpu}"
    return ResizeOutcome.ACCEPTED, "resize requested; the kubelet has not reported on it yet"


def qos_class(pod_spec: PodSpec) -> str:
    """Guaranteed, Burstable or BestEffort (https://kubernetes.io/docs/concepts/workloads/pods/pod-qos/)."""
    containers = list(pod_spec.get("containers") or []) + list(pod_spec.get("initContainers") or [])
    any_set = False
    guaranteed = True
    for container in containers:
        resources = container.get("resources") or {}
        requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
        if requests or limits:
            any_set = True
        for resource in ("cpu", "memory"):
            limit = limits.get(resource)
            request = requests.get(resource, limit)
            if limit is None or request is None or parse_quantity(request) != parse_quantity(limit):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"
