"""The Kubernetes API server's rules the fake enforces, each citing its documentation: schema validation
(kubernetes-validate, our CRD), merge semantics (JSON merge, strategic merge, server-side apply), label selectors,
and what may change on update or through the pod `resize` subresource. Pure functions over plain dicts.
"""

from __future__ import annotations

import copy
import functools
import importlib
import json
from typing import Any

from miniclusters.api.crd import build_crd
from miniclusters.api.quantity import cpu_millicores
from miniclusters.backends.kubernetes.api import FLUX_MINICLUSTER, JOB, MINICLUSTER, POD, ApiError, Kind, kind_of
from miniclusters.backends.kubernetes.status import qos_class

KUBERNETES_VERSION = "1.33"
DOCS_JOB_ELASTIC = "https://kubernetes.io/docs/concepts/workloads/controllers/job/#elastic-indexed-jobs"
DOCS_JOB_TEMPLATE = "https://kubernetes.io/docs/concepts/workloads/controllers/job/#pod-template"
DOCS_POD_UPDATE = "https://kubernetes.io/docs/concepts/workloads/pods/#pod-update-and-replacement"
DOCS_RESIZE = "https://kubernetes.io/docs/tasks/configure-pod-container/resize-container-resources/"
DOCS_CONCURRENCY = "https://kubernetes.io/docs/reference/using-api/api-concepts/#resource-versions"
DOCS_STATUS_CODES = "https://kubernetes.io/docs/reference/using-api/api-concepts/#http-status-codes"
DOCS_APF = "https://kubernetes.io/docs/concepts/cluster-administration/flow-control/"
DOCS_GC = "https://kubernetes.io/docs/concepts/architecture/garbage-collection/#owners-dependents"
DOCS_WATCH = "https://kubernetes.io/docs/reference/using-api/api-concepts/#efficient-detection-of-changes"
DOCS_SCALE = (
    "https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#scale-subresource"
)


@functools.lru_cache(maxsize=4096)
def _validate_cached(text: str) -> str | None:
    import kubernetes_validate

    try:
        kubernetes_validate.validate(json.loads(text), KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as exc:
        path = ".".join(str(p) for p in exc.path)
        return f"{path}: {exc.message}"
    return None


@functools.lru_cache(maxsize=1)
def _crd_validator() -> Any:
    jsonschema = importlib.import_module("jsonschema")  # no type stubs in the environment
    schema = build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return jsonschema.Draft7Validator(schema)


def validate_object(obj: dict[str, Any]) -> None:
    """422 unless obj passes the official schema (built-in kinds) or our CRD's schema (MiniCluster)."""
    kind = kind_of(obj)
    if kind in (MINICLUSTER, FLUX_MINICLUSTER):
        if kind == MINICLUSTER:
            errors = sorted(_crd_validator().iter_errors(_strip_nulls(obj)), key=lambda e: list(e.path))
            if errors:
                first = errors[0]
                raise ApiError(422, "Invalid", f"{'.'.join(map(str, first.path))}: {first.message}")
        return
    problem = _validate_cached(json.dumps(obj, sort_keys=True))
    if problem:
        raise ApiError(422, "Invalid", f"{obj['kind']} {obj['metadata'].get('name')!r} is invalid: {problem}")


def _strip_nulls(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _strip_nulls(v) for k, v in node.items() if v is not None}
    if isinstance(node, list):
        return [_strip_nulls(v) for v in node]
    return node


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: dicts merge, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def strategic_merge(target: Any, patch: Any) -> Any:
    """Strategic merge patch, as far as we use it: lists of named objects (containers) merge by name."""
    if isinstance(patch, dict):
        out = copy.deepcopy(target) if isinstance(target, dict) else {}
        for key, value in patch.items():
            if value is None:
                out.pop(key, None)
            else:
                out[key] = strategic_merge(out.get(key), value)
        return out
    if (
        isinstance(patch, list)
        and isinstance(target, list)
        and all(isinstance(x, dict) and "name" in x for x in [*patch, *target])
    ):
        merged = [copy.deepcopy(x) for x in target]
        for item in patch:
            for i, existing in enumerate(merged):
                if existing["name"] == item["name"]:
                    merged[i] = strategic_merge(existing, item)
                    break
            else:
                merged.append(copy.deepcopy(item))
        return merged
    return copy.deepcopy(patch)


def apply_merge(target: Any, applied: Any) -> Any:
    """Server-side apply approximated for a single field manager: applied fields win, others are kept."""
    if isinstance(applied, dict) and isinstance(target, dict):
        out = copy.deepcopy(target)
        for key, value in applied.items():
            out[key] = apply_merge(target.get(key), value)
        return out
    return copy.deepcopy(applied)


def _selector_matches(labels: dict[str, str], selector: str | None) -> bool:
    """Equality-based label selectors: `a=b,c=d`, `a!=b`, `a` (exists)."""
    if not selector:
        return True
    for term in selector.split(","):
        term = term.strip()
        if "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key.strip()) == value.strip():
                return False
        elif "=" in term:
            key, value = term.split("=", 1)
            if labels.get(key.strip().rstrip("=")) != value.strip():
                return False
        elif term not in labels:
            return False
    return True


def check_pod_template(template_spec: dict[str, Any], where: str) -> None:
    # Pods with restartPolicy Never (Job pods) may only use resizePolicy NotRequired (DOCS_RESIZE:
    # "If the Pod's restartPolicy is Never, container's resize restart policy must be set to NotRequired").
    if template_spec.get("restartPolicy") == "Never":
        for container in template_spec.get("containers", []):
            for policy in container.get("resizePolicy") or []:
                if policy.get("restartPolicy") == "RestartContainer":
                    raise ApiError(
                        422,
                        "Invalid",
                        f"{where}.containers[{container['name']}].resizePolicy: Invalid value: "
                        "'RestartContainer': must be 'NotRequired' when `restartPolicy` is 'Never'",
                    )


def check_update(kind: Kind, old: dict[str, Any], new: dict[str, Any]) -> None:
    name = old["metadata"]["name"]
    if kind == JOB:
        old_spec, new_spec = old.get("spec", {}), new.get("spec", {})
        # The Job's pod template is immutable once created (DOCS_JOB_TEMPLATE; only a suspended Job's
        # scheduling directives may change, which we never use).
        if old_spec.get("template") != new_spec.get("template"):
            raise ApiError(422, "Invalid", f'Job.batch "{name}" is invalid: spec.template: field is immutable')
        for immutable in ("completionMode", "selector"):
            if old_spec.get(immutable) != new_spec.get(immutable):
                raise ApiError(422, "Invalid", f'Job.batch "{name}" is invalid: spec.{immutable}: field is immutable')
        # Elastic Indexed Jobs (DOCS_JOB_ELASTIC): completions may change only for completionMode Indexed
        # and only together with parallelism, so that parallelism == completions.
        if old_spec.get("completions") != new_spec.get("completions"):
            indexed = new_spec.get("completionMode") == "Indexed"
            if not indexed or new_spec.get("completions") != new_spec.get("parallelism"):
                raise ApiError(
                    422,
                    "Invalid",
                    f'Job.batch "{name}" is invalid: spec.completions: Invalid value: '
                    f"{new_spec.get('completions')}: field is immutable (elastic Indexed Jobs may change it "
                    "only together with parallelism, keeping completions == parallelism)",
                )
    if kind == POD:
        old_spec, new_spec = copy.deepcopy(old.get("spec", {})), copy.deepcopy(new.get("spec", {}))
        # A pod's spec is immutable except images, activeDeadlineSeconds and added tolerations
        # (DOCS_POD_UPDATE); resources change only through the resize subresource (DOCS_RESIZE).
        for spec in (old_spec, new_spec):
            spec.pop("activeDeadlineSeconds", None)
            spec.pop("tolerations", None)
            for container in [*spec.get("containers", []), *spec.get("initContainers", [])]:
                container.pop("image", None)
        if old_spec != new_spec:
            raise ApiError(
                422,
                "Invalid",
                f'Pod "{name}" is invalid: spec: Forbidden: pod updates may not change fields other than '
                "`spec.containers[*].image`, `spec.initContainers[*].image`, `spec.activeDeadlineSeconds`, "
                "`spec.tolerations` (only additions to existing tolerations); resources change only through "
                "the resize subresource",
            )


def check_resize(old: dict[str, Any], new: dict[str, Any]) -> None:
    name = old["metadata"]["name"]
    old_spec, new_spec = copy.deepcopy(old["spec"]), copy.deepcopy(new["spec"])
    # The resize subresource changes only containers' cpu/memory requests and limits (DOCS_RESIZE).
    old_resources = [c.pop("resources", {}) for c in old_spec.get("containers", [])]
    new_resources = [c.pop("resources", {}) for c in new_spec.get("containers", [])]
    if old_spec != new_spec:
        raise ApiError(
            422, "Invalid", f'Pod "{name}" is invalid: spec: Forbidden: only cpu and memory resources are mutable'
        )
    for before, after in zip(old_resources, new_resources, strict=True):
        for section in ("requests", "limits"):
            for resource in before.get(section, {}):
                # Requests and limits cannot be removed by a resize (DOCS_RESIZE).
                if resource not in after.get(section, {}):
                    raise ApiError(
                        422,
                        "Invalid",
                        f'Pod "{name}" is invalid: resource {section} for {resource} cannot be removed',
                    )
        extra = {r for s in ("requests", "limits") for r in after.get(s, {})} - {"cpu", "memory"}
        if extra:
            raise ApiError(422, "Invalid", f'Pod "{name}" is invalid: only cpu and memory can be resized, not {extra}')
    # The QoS class is fixed at creation; a resize that would change it is rejected (DOCS_RESIZE).
    if qos_class(old["spec"]) != qos_class(new["spec"]):
        raise ApiError(
            422,
            "Invalid",
            f'Pod "{name}" is invalid: metadata: Invalid value: "{qos_class(new["spec"])}": '
            f"Pod QoS is immutable (was {qos_class(old['spec'])})",
        )


NODE_PORT_RANGE = range(30000, 32768)
"""The API server's default --service-node-port-range (30000-32767)."""


def allocate_node_ports(service: dict[str, Any], taken: set[int]) -> None:
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
                why = "is already allocated" if wanted in taken else "is not in the valid range (30000-32767)"
                raise ApiError(422, "Invalid", f"Service is invalid: spec.ports[{index}].nodePort: {wanted} {why}")
        else:
            wanted = next(p for p in NODE_PORT_RANGE if p not in taken)
            port["nodePort"] = wanted
        taken.add(wanted)


def check_resize_fits_node(pod: dict[str, Any], node_cpu_millicores: int) -> None:
    """The apiserver's PodResize admission (plugin/pkg/admission/podresize, Kubernetes 1.33+): a resize whose pod
    would request more CPU than its node's allocatable is refused at once, 403 with the cause NodeCapacity and
    the message the real server gives (seen on the cluster of `minicluster kube up`, v1.37.2); the kubelet never
    sees it. A resize that fits the node but not what is free on it now goes through (Deferred by the kubelet)."""
    requested = sum(
        cpu_millicores(str(((c.get("resources") or {}).get("requests") or {}).get("cpu") or "0"))
        for c in pod["spec"].get("containers", [])
    )
    if requested > node_cpu_millicores:
        name = pod["metadata"]["name"]
        raise ApiError(
            403,
            "Forbidden",
            f'pods "{name}" is forbidden: node didn\'t have enough allocatable resources: cpu, '
            f"requested: {requested}, allocatable: {node_cpu_millicores}",
            ("NodeCapacity",),
        )
