"""Pure reconcile decisions: observed state in, actions + status + events out. No API calls here.

Level-triggered: the plan depends only on what is observed now, never on what happened before, so running it
twice (or after a crash half-way) converges on the same objects. Names are deterministic, so nothing is ever
created twice; an existing CURVE certificate is reused; the immutable Job template is never re-sent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from miniclusters.api import SpecError, load_minicluster
from miniclusters.api.conversion import from_flux_operator
from miniclusters.api.errors import Problem
from miniclusters.api.spec import FLUX_OPERATOR_API_VERSION, MiniCluster
from miniclusters.backends.kubernetes.jobs import job_outcome, registered_hosts, scale_patch
from miniclusters.backends.kubernetes.objects import (
    TEMPLATE_HASH_ANNOTATION,
    certificate_from_secret,
    desired_objects,
    selector_for,
)
from miniclusters.backends.kubernetes.status import RESIZE_IN_PROGRESS, RESIZE_PENDING, live_pods, pod_status
from miniclusters.operator import conditions as cond
from miniclusters.render import RenderOptions


@dataclass(frozen=True)
class Observed:
    """Everything the plan looks at, as read from the API (None when absent)."""

    cluster: dict[str, Any]
    secret: dict[str, Any] | None = None
    config_map: dict[str, Any] | None = None
    service: dict[str, Any] | None = None
    job: dict[str, Any] | None = None
    pods: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class Apply:
    obj: dict[str, Any]
    reason: str
    """Created or Updated."""


@dataclass(frozen=True)
class ScaleJob:
    patch: dict[str, Any]
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
    status: dict[str, Any]
    events: list[EventSpec]
    mc: MiniCluster | None = None


def load_cluster(cluster: dict[str, Any]) -> MiniCluster:
    """Our MiniCluster from a stored object of either kind (the Flux Operator's is converted); SpecError if bad."""
    data = {k: v for k, v in cluster.items() if k != "status"}
    meta = data.get("metadata", {})
    data["metadata"] = {k: meta[k] for k in ("name", "namespace", "labels", "annotations") if k in meta}
    if data.get("apiVersion") == FLUX_OPERATOR_API_VERSION:
        return from_flux_operator(data)
    return load_minicluster(data, source=f"MiniCluster {meta.get('namespace')}/{meta.get('name')}")


def with_registered_ceiling(mc: MiniCluster, job: dict[str, Any] | None) -> MiniCluster:
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


def _differs(current: dict[str, Any] | None, desired: dict[str, Any], keys: tuple[str, ...]) -> bool:
    if current is None:
        return True
    return any(current.get(k) != desired.get(k) for k in keys)


def _service_differs(current: dict[str, Any] | None, desired: dict[str, Any]) -> bool:
    if current is None:
        return True
    have, want = current.get("spec", {}), desired["spec"]
    return any(have.get(k) != want.get(k) for k in ("selector", "ports", "publishNotReadyAddresses"))


def plan(observed: Observed, options: RenderOptions, now: str) -> Plan:
    """What to do for one MiniCluster and the status it should show afterwards."""
    cluster = observed.cluster
    meta = cluster["metadata"]
    generation = int(meta.get("generation", 0))
    old_status = dict(cluster.get("status") or {})
    conditions: list[dict[str, Any]] = list(old_status.get("conditions") or [])
    events: list[EventSpec] = []
    try:
        mc = with_registered_ceiling(load_cluster(cluster), observed.job)
    except SpecError as exc:
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
        status = {**old_status, "conditions": conditions, "observedGeneration": generation, "phase": "Invalid"}
        status.setdefault("selector", selector_for(meta["name"]))
        status.setdefault("size", 0)
        return Plan([], status, events)

    namespace = meta.get("namespace") or mc.namespace
    certificate = certificate_from_secret(observed.secret)
    desired = {o["kind"]: o for o in desired_objects(mc, namespace, cluster, options, certificate)}
    actions: list[Action] = []
    if observed.secret is None or certificate is None:
        actions.append(Apply(desired["Secret"], "Created" if observed.secret is None else "Updated"))
    if _differs(observed.config_map, desired["ConfigMap"], ("data",)):
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
            actions.append(ScaleJob(patch, current, int(patch["spec"]["parallelism"])))
    if finished and succeeded and mc.spec.cleanup:
        actions.append(DeleteCluster("the lead broker finished and spec.cleanup is set"))

    for action in actions:
        if isinstance(action, Apply):
            kind, name = action.obj["kind"], action.obj["metadata"]["name"]
            events.append(EventSpec("Normal", action.reason, "Apply", f"{action.reason.lower()} {kind} {name}"))
        elif isinstance(action, ScaleJob):
            note = f"scaled Job from {action.from_size} to {action.to_size} pods (spec.size {mc.spec.size})"
            events.append(EventSpec("Normal", "Scaled", "Scale", note))
        else:
            events.append(EventSpec("Normal", "Deleted", "Delete", action.reason))

    pods = [pod_status(p) for p in live_pods(observed.pods)]
    active = [p for p in pods if p.phase in ("Pending", "Running")]
    ready = sum(1 for p in pods if p.ready)
    size = mc.spec.size
    job_size = int(job["spec"].get("parallelism") or 0) if job else 0

    conditions = cond.set_condition(conditions, cond.INVALID_SPEC, False, "SpecValid", "", now, generation)
    if finished:
        word = "Completed" if succeeded else "Failed"
        conditions = cond.set_condition(conditions, cond.READY, False, word, f"the Job {word.lower()}", now, generation)
    elif job is not None and ready >= size and job_size == size:
        conditions = cond.set_condition(
            conditions, cond.READY, True, "AllPodsReady", f"{ready}/{size} pods ready", now, generation
        )
    else:
        conditions = cond.set_condition(
            conditions, cond.READY, False, "PodsNotReady", f"{ready}/{size} pods ready", now, generation
        )

    scaling = not finished and (job_size != size or len(active) != size)
    if scaling:
        direction = "ScalingUp" if max(job_size, len(active)) < size else "ScalingDown"
        message = f"{len(active)} pods active, Job parallelism {job_size}, spec.size {size}"
        conditions = cond.set_condition(conditions, cond.SCALING, True, direction, message, now, generation)
    else:
        conditions = cond.set_condition(conditions, cond.SCALING, False, "AtSize", f"{size} pods", now, generation)

    resizing = []
    for p in pods:
        for c in p.conditions:
            if c.status == "True" and c.type in (RESIZE_PENDING, RESIZE_IN_PROGRESS):
                reason = c.reason or ("InProgress" if c.type == RESIZE_IN_PROGRESS else "Pending")
                resizing.append((reason, f"pod {p.index} ({p.name}): {reason} {c.message}".rstrip()))
    if resizing:
        reasons = sorted({r for r, _ in resizing}, key=_reason_order)
        message = "; ".join(m for _, m in resizing)
        conditions = cond.set_condition(conditions, cond.RESIZING, True, reasons[0], message, now, generation)
    else:
        conditions = cond.set_condition(conditions, cond.RESIZING, False, "NoResize", "", now, generation)

    failed = [p for p in pods if p.phase == "Failed"]
    job_failures = int(((job or {}).get("status") or {}).get("failed") or 0)
    if template_drift:
        conditions = cond.set_condition(
            conditions, cond.DEGRADED, True, "PodTemplateImmutable", template_drift, now, generation
        )
    elif finished and not succeeded:
        conditions = cond.set_condition(conditions, cond.DEGRADED, True, "JobFailed", "the Job failed", now, generation)
    elif failed or job_failures:
        names = ", ".join(f"{p.name} (exit {p.exit_code})" for p in failed) or "replaced by the Job controller"
        message = f"{max(job_failures, len(failed))} pod failure(s) (backoffLimit {mc.spec.backoff_limit}): {names}"
        conditions = cond.set_condition(conditions, cond.DEGRADED, True, "PodsFailed", message, now, generation)
    else:
        conditions = cond.set_condition(conditions, cond.DEGRADED, False, "AsExpected", "", now, generation)

    status = {
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


def phase_of(conditions: list[dict[str, Any]], ready_pods: int) -> str:
    """One word for `kubectl get miniclusters` (the Phase column), read off the conditions just set: Completed or
    Failed once the Job ended, Running when every pod is ready at size, Pending before any pod is ready, Scaling
    while the size changes, else NotReady (a pod lost or restarting)."""
    ready = cond.find(conditions, cond.READY) or {}
    if ready.get("reason") in ("Completed", "Failed"):
        return str(ready["reason"])
    if ready.get("status") == "True":
        return "Running"
    if ready_pods == 0:
        return "Pending"
    scaling = cond.find(conditions, cond.SCALING) or {}
    return "Scaling" if scaling.get("status") == "True" else "NotReady"


def _reason_order(reason: str) -> int:
    order = ["Infeasible", "Deferred", "InProgress", "Error"]
    return order.index(reason) if reason in order else len(order)
