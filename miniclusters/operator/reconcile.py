"""Pure reconcile decisions: observed state in, actions + status + events out. No API calls here.

Level-triggered: the plan depends only on what is observed now, never on what happened before, so running it
twice (or after a crash half-way) converges on the same objects. Names are deterministic, so nothing is ever
created twice; an existing CURVE certificate is reused; the immutable Job template is never re-sent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, cast

from miniclusters.api import SpecError, load_minicluster
from miniclusters.api.conversion import from_flux_operator
from miniclusters.api.errors import Problem
from miniclusters.api.spec import FLUX_OPERATOR_API_VERSION, MiniCluster
from miniclusters.api.status import ConditionJson, StatusJson
from miniclusters.backends.base import RESIZE_IN_PROGRESS, RESIZE_PENDING, PodStatus
from miniclusters.backends.kubernetes.jobs import job_outcome, registered_hosts, scale_patch
from miniclusters.backends.kubernetes.objects import (
    TEMPLATE_HASH_ANNOTATION,
    certificate_from_secret,
    desired_objects,
    selector_for,
)
from miniclusters.backends.kubernetes.status import live_pods, pod_status
from miniclusters.kube_shapes import Job, JobScalePatch, KubeObject, Manifest, Pod
from miniclusters.operator import conditions as cond
from miniclusters.render import RenderOptions


@dataclass(frozen=True)
class Observed:
    """Everything the plan looks at, as read from the API (None when absent)."""

    cluster: KubeObject
    secret: KubeObject | None = None
    config_map: KubeObject | None = None
    service: KubeObject | None = None
    job: Job | None = None
    pods: list[Pod] = field(default_factory=list)


@dataclass(frozen=True)
class Apply:
    obj: Manifest
    reason: str
    """Created or Updated."""


@dataclass(frozen=True)
class ScaleJob:
    patch: JobScalePatch
    from_size: int
    to_size: int


@dataclass(frozen=True)
class DeleteCluster:
    reason: str


Action = Apply | ScaleJob | DeleteCluster


@dataclass(frozen=True)
class EventSpec:
    type: Literal["Normal", "Warning"]
    reason: str
    action: str
    note: str


@dataclass(frozen=True)
class Plan:
    actions: list[Action]
    status: StatusJson
    events: list[EventSpec]
    mc: MiniCluster | None = None


def load_cluster(cluster: KubeObject) -> MiniCluster:
    """Our MiniCluster from a stored object of either kind (the Flux Operator's is converted); SpecError if bad."""
    data = {k: v for k, v in cluster.items() if k != "status"}
    meta = cluster.get("metadata", {})
    data["metadata"] = {k: v for k, v in meta.items() if k in ("name", "namespace", "labels", "annotations")}
    if cluster.get("apiVersion") == FLUX_OPERATOR_API_VERSION:
        return from_flux_operator(data)
    return load_minicluster(data, source=f"MiniCluster {meta.get('namespace')}/{meta.get('name')}")


def with_registered_ceiling(mc: MiniCluster, job: Job | None) -> MiniCluster:
    """The spec with its ceiling taken from what was created: without spec.maxSize the ceiling is the hosts the
    Job's pods were created with (not the current size), so a scale down (kubectl scale, an HPA) never renders a
    smaller broker config, and a scale up beyond those hosts is refused."""
    registered = registered_hosts(job)
    if registered is None or mc.spec.max_size:
        return mc
    if mc.spec.size > registered:
        problem = Problem(
            "spec.size",
            f"size {mc.spec.size} is above the {registered} hosts registered when the MiniCluster was created "
            f"(spec.maxSize is unset; set it before the MiniCluster is created to allow growth)",
        )
        raise SpecError([problem], source=f"MiniCluster {mc.namespace}/{mc.name}")
    return mc.model_copy(update={"spec": mc.spec.model_copy(update={"max_size": registered})})


def _data_differs(current: KubeObject | None, desired: Manifest) -> bool:
    return current is None or current.get("data") != desired.get("data")


def _service_differs(current: KubeObject | None, desired: Manifest) -> bool:
    if current is None:
        return True
    have, want = current.get("spec", {}), desired["spec"]
    return any(have.get(k) != want.get(k) for k in ("selector", "ports", "publishNotReadyAddresses"))


def plan(observed: Observed, options: RenderOptions, now: str) -> Plan:
    """What to do for one MiniCluster and the status it should show afterwards."""
    cluster = observed.cluster
    generation = int(cluster["metadata"].get("generation", 0))
    old_status = cast(StatusJson, dict(cluster.get("status") or {}))  # the one place the stored status is read
    try:
        mc = with_registered_ceiling(load_cluster(cluster), observed.job)
    except SpecError as exc:
        return _invalid(cluster, old_status, exc, now, generation)
    actions, template_drift = _object_actions(observed, mc, options)
    events = [_action_event(action, mc) for action in actions]
    finished, succeeded = job_outcome(observed.job)
    pods = [pod_status(p) for p in live_pods(observed.pods)]
    ready = sum(1 for p in pods if p.ready)
    job = observed.job
    job_size = int(job["spec"].get("parallelism") or 0) if job else 0
    stamp = _Stamp(now, generation)
    conditions = list(old_status.get("conditions") or [])
    conditions = cond.set_condition(conditions, cond.INVALID_SPEC, False, "SpecValid", "", now, generation)
    outcome = (finished, bool(succeeded))
    conditions = _ready(conditions, stamp, outcome, job is not None and job_size == mc.spec.size, ready, mc)
    conditions = _scaling(conditions, stamp, finished, job_size, pods, mc.spec.size)
    conditions = _resizing(conditions, stamp, pods)
    job_failures = int(((job or {}).get("status") or {}).get("failed") or 0)
    conditions = _degraded(conditions, stamp, template_drift, outcome, pods, job_failures, mc)
    status: StatusJson = {
        **old_status,
        "size": job_size,
        "selector": selector_for(mc.name),
        "maximumSize": mc.spec.effective_max_size,
        "readyPods": ready,
        "observedGeneration": generation,
        "conditions": conditions,
        "phase": phase_of(conditions, ready),
    }
    return Plan(actions, status, events, mc)


@dataclass(frozen=True)
class _Stamp:
    """When a condition is set, and for which generation of the spec."""

    now: str
    generation: int


def _invalid(cluster: KubeObject, old_status: StatusJson, exc: SpecError, now: str, generation: int) -> Plan:
    """A spec in error changes nothing: InvalidSpec (with one Warning Event per new message) and phase Invalid."""
    meta = cluster["metadata"]
    conditions = list(old_status.get("conditions") or [])
    events: list[EventSpec] = []
    message = "; ".join(str(p) for p in exc.problems)
    was = cond.find(conditions, cond.INVALID_SPEC)
    if not (was and was.get("status") == "True" and was.get("message") == message):
        events.append(EventSpec("Warning", "InvalidSpec", "Validate", f"nothing changed: {message}"))
    conditions = cond.set_condition(conditions, cond.INVALID_SPEC, True, "SpecRejected", message, now, generation)
    ready_condition = cond.find(conditions, cond.READY)
    if ready_condition is None or ready_condition.get("status") != "True":
        conditions = cond.set_condition(
            conditions, cond.READY, False, "InvalidSpec", "the spec is invalid; see InvalidSpec", now, generation
        )
    status: StatusJson = {**old_status, "conditions": conditions, "observedGeneration": generation, "phase": "Invalid"}
    status.setdefault("selector", selector_for(meta["name"]))
    status.setdefault("size", 0)
    return Plan([], status, events)


def _object_actions(observed: Observed, mc: MiniCluster, options: RenderOptions) -> tuple[list[Action], str]:
    """What to apply, scale or delete to reach the desired objects, and why the Job's template cannot follow
    (empty when it can)."""
    cluster = observed.cluster
    namespace = cluster["metadata"].get("namespace") or mc.namespace
    certificate = certificate_from_secret(observed.secret)
    rendered = desired_objects(mc, namespace, cluster, options, certificate)
    desired = {o["kind"]: o for o in rendered}  # what render made, as Kubernetes documents it
    actions: list[Action] = []
    if observed.secret is None or certificate is None:
        actions.append(Apply(desired["Secret"], "Created" if observed.secret is None else "Updated"))
    if _data_differs(observed.config_map, desired["ConfigMap"]):
        actions.append(Apply(desired["ConfigMap"], "Created" if observed.config_map is None else "Updated"))
    if _service_differs(observed.service, desired["Service"]):
        actions.append(Apply(desired["Service"], "Created" if observed.service is None else "Updated"))
    job = observed.job
    finished, succeeded = job_outcome(job)
    template_drift = ""
    if job is None:
        actions.append(Apply(desired["Job"], "Created"))
    else:
        have = (job["metadata"].get("annotations") or {}).get(TEMPLATE_HASH_ANNOTATION)
        want = desired["Job"]["metadata"]["annotations"][TEMPLATE_HASH_ANNOTATION]
        if have != want:
            template_drift = (
                "the pod template changed, but a Job's pod template is immutable: the running pods keep the old "
                "one; delete and re-create the MiniCluster to apply it (spec.size changes apply in place)"
            )
        patch = None if finished else scale_patch(job, mc.spec.size)
        if patch is not None:
            current = int(job["spec"].get("parallelism") or 0)
            actions.append(ScaleJob(patch, current, int(patch["spec"]["parallelism"] or 0)))
    if finished and succeeded and mc.spec.cleanup:
        actions.append(DeleteCluster("the lead broker finished and spec.cleanup is set"))
    return actions, template_drift


def _action_event(action: Action, mc: MiniCluster) -> EventSpec:
    if isinstance(action, Apply):
        kind, name = action.obj["kind"], action.obj["metadata"]["name"]
        return EventSpec("Normal", action.reason, "Apply", f"{action.reason.lower()} {kind} {name}")
    if isinstance(action, ScaleJob):
        note = f"scaled Job from {action.from_size} to {action.to_size} pods (spec.size {mc.spec.size})"
        return EventSpec("Normal", "Scaled", "Scale", note)
    return EventSpec("Normal", "Deleted", "Delete", action.reason)


def _ready(
    conditions: list[ConditionJson],
    at: _Stamp,
    outcome: tuple[bool, bool],
    job_at_size: bool,
    ready: int,
    mc: MiniCluster,
) -> list[ConditionJson]:
    finished, succeeded = outcome
    size = mc.spec.size
    if finished:
        word = "Completed" if succeeded else "Failed"
        return cond.set_condition(conditions, cond.READY, False, word, f"the Job {word.lower()}", at.now, at.generation)
    message = f"{ready}/{size} pods ready"
    if job_at_size and ready >= size:
        return cond.set_condition(conditions, cond.READY, True, "AllPodsReady", message, at.now, at.generation)
    return cond.set_condition(conditions, cond.READY, False, "PodsNotReady", message, at.now, at.generation)


def _scaling(
    conditions: list[ConditionJson], at: _Stamp, finished: bool, job_size: int, pods: list[PodStatus], size: int
) -> list[ConditionJson]:
    active = [p for p in pods if p.phase in ("Pending", "Running")]
    if not finished and (job_size != size or len(active) != size):
        direction = "ScalingUp" if max(job_size, len(active)) < size else "ScalingDown"
        message = f"{len(active)} pods active, Job parallelism {job_size}, spec.size {size}"
        return cond.set_condition(conditions, cond.SCALING, True, direction, message, at.now, at.generation)
    return cond.set_condition(conditions, cond.SCALING, False, "AtSize", f"{size} pods", at.now, at.generation)


def _resizing(conditions: list[ConditionJson], at: _Stamp, pods: list[PodStatus]) -> list[ConditionJson]:
    resizing = []
    for p in pods:
        for c in p.conditions:
            if c.status == "True" and c.type in (RESIZE_PENDING, RESIZE_IN_PROGRESS):
                reason = c.reason or ("InProgress" if c.type == RESIZE_IN_PROGRESS else "Pending")
                resizing.append((reason, f"pod {p.index} ({p.name}): {reason} {c.message}".rstrip()))
    if resizing:
        reasons = sorted({r for r, _ in resizing}, key=_reason_order)
        message = "; ".join(m for _, m in resizing)
        return cond.set_condition(conditions, cond.RESIZING, True, reasons[0], message, at.now, at.generation)
    return cond.set_condition(conditions, cond.RESIZING, False, "NoResize", "", at.now, at.generation)


def _degraded(
    conditions: list[ConditionJson],
    at: _Stamp,
    template_drift: str,
    outcome: tuple[bool, bool],
    pods: list[PodStatus],
    job_failures: int,
    mc: MiniCluster,
) -> list[ConditionJson]:
    finished, succeeded = outcome
    failed = [p for p in pods if p.phase == "Failed"]
    if template_drift:
        reason, message = "PodTemplateImmutable", template_drift
    elif finished and not succeeded:
        reason, message = "JobFailed", "the Job failed"
    elif failed or job_failures:
        names = ", ".join(f"{p.name} (exit {p.exit_code})" for p in failed) or "replaced by the Job controller"
        reason = "PodsFailed"
        message = f"{max(job_failures, len(failed))} pod failure(s) (backoffLimit {mc.spec.backoff_limit}): {names}"
    else:
        return cond.set_condition(conditions, cond.DEGRADED, False, "AsExpected", "", at.now, at.generation)
    return cond.set_condition(conditions, cond.DEGRADED, True, reason, message, at.now, at.generation)


def phase_of(conditions: list[ConditionJson], ready_pods: int) -> str:
    """One word for `kubectl get miniclusters` (the Phase column), read off the conditions just set: Completed or
    Failed once the Job ended, Running when every pod is ready at size, Pending before any pod is ready, Scaling
    while the size changes, else NotReady (a pod lost or restarting)."""
    ready = cond.find(conditions, cond.READY)
    if ready is not None and ready.get("reason") in ("Completed", "Failed"):
        return str(ready["reason"])
    if ready is not None and ready.get("status") == "True":
        return "Running"
    if ready_pods == 0:
        return "Pending"
    return "Scaling" if cond.is_true(conditions, cond.SCALING) else "NotReady"


def _reason_order(reason: str) -> int:
    order = ["Infeasible", "Deferred", "InProgress", "Error"]
    return order.index(reason) if reason in order else len(order)
