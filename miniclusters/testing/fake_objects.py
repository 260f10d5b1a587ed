"""What the fake API server itself writes into the objects it stores: the fields a created Job, Service, Pod or
MiniCluster gets from the server, and the Scale subresource of our custom resources (DOCS_SCALE)."""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any, cast

from miniclusters.backends.kubernetes.api import (
    FLUX_MINICLUSTER,
    JOB,
    MINICLUSTER,
    POD,
    SERVICE,
    ApiError,
    Kind,
)
from miniclusters.backends.kubernetes.status import qos_class
from miniclusters.kube_shapes import Job, KubeObject, ObjectMeta, Pod, PodSpec, Service
from miniclusters.testing.kube_rules import check_pod_template, check_resize, check_resize_fits_node

CUSTOM_KINDS = (MINICLUSTER, FLUX_MINICLUSTER)


def server_defaults(kind: Kind, stored: KubeObject, services: Iterable[KubeObject]) -> None:
    """Fill in what the server sets on a new object of `kind` (its metadata's uid and name already set): a Job's
    selector and pod labels, a Service's node ports, a Pod's first status, an empty status for the others that
    have one. `services` are the Services already stored (whose node ports are taken). The object is read as
    its kind where its kind is known."""
    if kind == JOB:
        _job_defaults(cast(Job, stored))
    if kind == SERVICE:
        taken = {p.get("nodePort") for o in services for p in o.get("spec", {}).get("ports", [])}
        allocate_node_ports(cast(Service, stored), {p for p in taken if isinstance(p, int)})
        if stored["spec"].get("type") == "LoadBalancer":
            stored["status"] = {"loadBalancer": {}}  # no cloud controller here: no ingress address, ever
    if kind == POD:
        pod = cast(Pod, stored)
        check_pod_template(pod["spec"], "spec")
        pod["status"] = {"phase": "Pending", "qosClass": qos_class(pod["spec"]), "conditions": []}
    if kind in CUSTOM_KINDS:
        stored["status"] = {}


def _job_defaults(job: Job) -> None:
    """A new Job's selector and its pod template's labels (the Job controller's), its empty status."""
    meta = job["metadata"]
    check_pod_template(job["spec"]["template"]["spec"], "spec.template.spec")
    labels = {"batch.kubernetes.io/controller-uid": meta["uid"], "batch.kubernetes.io/job-name": meta["name"]}
    job["spec"].setdefault("selector", {"matchLabels": {"batch.kubernetes.io/controller-uid": meta["uid"]}})
    template_meta = job["spec"]["template"].setdefault("metadata", {})
    template_meta["labels"] = {**template_meta.get("labels", {}), **labels, "job-name": meta["name"]}
    job["status"] = {}


def without_status(obj: KubeObject) -> KubeObject:
    """A shallow copy without the status: what a write of the object itself (not its status) carries."""
    out = obj.copy()
    out.pop("status", None)
    return out


def missing(kind: Kind, name: str) -> ApiError:
    """A deleted (or never created) object answers 404 NotFound (DOCS_STATUS_CODES)."""
    group = f".{kind.group}" if kind.group else ""
    return ApiError(404, "NotFound", f'{kind.plural}{group} "{name}" not found')


def check_version(kind: Kind, current: ObjectMeta, sent: ObjectMeta | None) -> None:
    """Optimistic concurrency: a write whose metadata carries a stale resourceVersion fails with 409 Conflict
    (DOCS_CONCURRENCY)."""
    wanted = (sent or {}).get("resourceVersion")
    if wanted and wanted != current["resourceVersion"]:
        raise ApiError(
            409,
            "Conflict",
            f'Operation cannot be fulfilled on {kind.plural} "{current["name"]}": the object has '
            "been modified; please apply your changes to the latest version and try again",
        )


def scaled(kind: Kind, current: KubeObject, body: Any) -> KubeObject:
    """The custom resource with the Scale patch applied: the CRD's scale subresource maps Scale.spec.replicas to
    .spec.size and reads status.size and status.selector (DOCS_SCALE), which is what `kubectl scale` and a
    HorizontalPodAutoscaler use."""
    if kind not in CUSTOM_KINDS:
        raise ApiError(404, "NotFound", "no scale subresource for this kind in the fake")
    replicas = (body.get("spec") or {}).get("replicas")
    if not isinstance(replicas, int) or replicas < 0:
        raise ApiError(422, "Invalid", "spec.replicas: must be a non-negative integer")
    new = copy.deepcopy(current)
    new["spec"]["size"] = replicas
    return new


def scale_of(obj: KubeObject) -> KubeObject:
    """The Scale subresource of a custom resource (autoscaling/v1)."""
    status = obj.get("status") or {}
    return {
        "apiVersion": "autoscaling/v1",
        "kind": "Scale",
        "metadata": {"name": obj["metadata"]["name"], "namespace": obj["metadata"]["namespace"]},  # namespaced kinds
        "spec": {"replicas": obj["spec"].get("size", 1)},
        "status": {"replicas": status.get("size", 0), "selector": status.get("selector", "")},
    }


NODE_PORT_RANGE = range(30000, 32768)
"""The API server's default --service-node-port-range (30000-32767)."""


def allocate_node_ports(service: Service, taken: set[int]) -> None:
    """A NodePort or LoadBalancer Service gets a node port per port from the range unless it names one; a port
    already allocated, or outside the range, is refused with 422 (kubernetes.io/docs/concepts/services-networking/
    service/#type-nodeport: "the Kubernetes control plane allocates a port from a range specified by
    --service-node-port-range flag (default: 30000-32767)"; "If you want a specific port number, you can specify
    a value in the nodePort field ... If that port is already in use ... the API transaction failed")."""
    spec = service.get("spec", {})
    if spec.get("type") not in ("NodePort", "LoadBalancer"):
        return
    for index, port in enumerate(spec.get("ports", [])):
        wanted = port.get("nodePort")
        if wanted is not None:
            if wanted not in NODE_PORT_RANGE or wanted in taken:
                # the real server's words (v1.37.2)
                why = (
                    "provided port is already allocated"
                    if wanted in taken
                    else "provided port is not in the valid range. The range of valid ports is 30000-32767"
                )
                name = service.get("metadata", {}).get("name")
                raise ApiError(
                    422,
                    "Invalid",
                    f'Service "{name}" is invalid: spec.ports[{index}].nodePort: Invalid value: {wanted}: {why}',
                )
        else:
            wanted = next(p for p in NODE_PORT_RANGE if p not in taken)
            port["nodePort"] = wanted
        taken.add(wanted)


def no_field_manager() -> ApiError:
    """An apply without a field manager (the real server's words, v1.37.2)."""
    message = 'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch'
    return ApiError(422, "Invalid", message)


def unconditional_update_refused(kind: Kind, name: str) -> ApiError:
    """Built-in kinds allow an unconditional update (a PUT without resourceVersion); custom resources do not (the
    real server, v1.37.2: a ConfigMap's went through, a MiniCluster's was refused so)."""
    group = f".{kind.group}" if kind.group else ""
    return ApiError(
        422,
        "Invalid",
        f'{kind.plural}{group} "{name}" is invalid: metadata.resourceVersion: Invalid value: 0: '
        "must be specified for an update",
    )


def resized_spec(current: Pod, new: Pod, admit: bool, node_millicores: int) -> PodSpec:
    """The pod spec a `resize` patch leaves (kube_rules.check_resize). The PodResize admission weighs a pod bound
    to a node (the real server let a resize of an unscheduled pod far past the node's CPU through, v1.37.2); the
    fake's kubelet binds and starts a pod at once, so a pod it has not started (start_pods False) is unbound. A
    test forcing the kubelet's answer (`admit` False) gets it."""
    spec = check_resize(current, new)
    bound = current["status"].get("phase") != "Pending"
    if admit and bound:
        check_resize_fits_node({**new, "spec": spec}, node_millicores)
    return spec
