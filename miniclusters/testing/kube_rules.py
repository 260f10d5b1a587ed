"""The Kubernetes API server's rules the fake enforces, each citing its documentation: schema validation
(kubernetes-validate, our CRD), merge semantics (JSON merge, strategic merge, server-side apply), label selectors,
and what may change on update or through the pod `resize` subresource. Pure functions over plain dicts.
"""

from __future__ import annotations

import copy
import functools
import importlib
import json
from dataclasses import dataclass
from typing import Any, Literal

from miniclusters.api.crd import build_crd
from miniclusters.api.quantity import cpu_millicores
from miniclusters.backends.kubernetes.api import FLUX_MINICLUSTER, JOB, MINICLUSTER, POD, ApiError, Kind, kind_of
from miniclusters.backends.kubernetes.status import qos_class
from miniclusters.kube_shapes import KubeObject, Pod, PodSpec
from miniclusters.testing.kube_cel import refusal

KUBERNETES_VERSION = "1.37"
"""The real server's version (the cluster of `minicluster kube up`: v1.37.2): its schemas."""
DOCS_JOB_ELASTIC = "https://kubernetes.io/docs/concepts/workloads/controllers/job/#elastic-indexed-jobs"
DOCS_JOB_TEMPLATE = "https://kubernetes.io/docs/concepts/workloads/controllers/job/#pod-template"
DOCS_POD_UPDATE = "https://kubernetes.io/docs/concepts/workloads/pods/#pod-update-and-replacement"
DOCS_RESIZE = "https://kubernetes.io/docs/tasks/configure-pod-container/resize-container-resources/"
DOCS_CONCURRENCY = "https://kubernetes.io/docs/reference/using-api/api-concepts/#resource-versions"
DOCS_STATUS_CODES = "https://kubernetes.io/docs/reference/using-api/api-concepts/#http-status-codes"
DOCS_APF = "https://kubernetes.io/docs/concepts/cluster-administration/flow-control/"
DOCS_GC = "https://kubernetes.io/docs/concepts/architecture/garbage-collection/#owners-dependents"
DOCS_WATCH = "https://kubernetes.io/docs/reference/using-api/api-concepts/#efficient-detection-of-changes"
DOCS_FIELD_VALIDATION = "https://kubernetes.io/docs/reference/using-api/api-concepts/#field-validation"
DOCS_SCALE = (
    "https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#scale-subresource"
)


@dataclass(frozen=True)
class SchemaProblem:
    """The first thing the official schema finds wrong with an object (a jsonschema error, reduced)."""

    validator: str
    """The schema keyword that failed: type, required, additionalProperties, enum, ..."""
    path: tuple[str | int, ...]
    message: str
    instance: Any
    expected: str
    """For `type`: the type the schema wants (its first, when it allows null too)."""
    unknown: tuple[str, ...]
    """For `additionalProperties`: the names the schema does not know."""
    map_value: bool = False
    """The value of a map's entry (`data.a` of a ConfigMap)."""

    @property
    def where(self) -> str:
        return field_path(self.path)

    @property
    def go_field(self) -> str:
        """The field as Go's decoder names it: a map's entry by the map's field (`data`, not `data.a`)."""
        return field_path(self.path[:-1] if self.map_value else self.path)


def field_path(path: tuple[str | int, ...] | list[str | int]) -> str:
    """`spec.containers[0].resources` as the API server writes a field's path."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


@functools.lru_cache(maxsize=4096)
def _validate_cached(text: str) -> SchemaProblem | None:
    import kubernetes_validate

    try:
        kubernetes_validate.validate(json.loads(text), KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as exc:
        wanted = exc.validator_value if exc.validator == "type" else ""
        expected = next((t for t in wanted if t != "null"), "") if isinstance(wanted, list) else str(wanted)
        known = exc.schema.get("properties", {}) if isinstance(exc.schema, dict) else {}
        unknown = tuple(sorted(k for k in exc.instance if k not in known)) if isinstance(exc.instance, dict) else ()
        map_value = list(exc.schema_path)[-2:-1] == ["additionalProperties"] and bool(exc.path)
        return SchemaProblem(
            str(exc.validator), tuple(exc.path), exc.message, exc.instance, expected, unknown, map_value
        )
    return None


@functools.lru_cache(maxsize=1)
def _crd_validator() -> Any:
    jsonschema = importlib.import_module("jsonschema")  # no type stubs in the environment
    schema = build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return jsonschema.Draft7Validator(schema)


_JSON_TYPES = {bool: "bool", int: "number", float: "number", str: "string", list: "array", dict: "object"}


def validate_object(
    obj: KubeObject, how: Literal["create", "patch", "apply"] = "create"
) -> tuple[KubeObject, list[str]]:
    """The object as the API server stores it and the warnings it answers with, or the error it answers with.

    Built-in kinds are checked against the official schema of the real server's version (kubernetes-validate,
    strict), answering as the real server does (seen on the cluster of `minicluster kube up`, v1.37.2):
    - an unknown field is dropped with a warning `unknown field "metadata.labelz"`: the client sends no
      fieldValidation, and the server's default is Warn (DOCS_FIELD_VALIDATION);
    - a value of the wrong JSON type cannot be decoded: 400 BadRequest `ConfigMap in version "v1" cannot be
      handled as a ConfigMap: json: cannot unmarshal number into Go struct field ConfigMap.data of type string`
      on create or update; 422 `"" is invalid: patch: Invalid value: ...` when it came in a patch;
    - server-side apply builds a typed patch first, and a field of the wrong type or an unknown one fails that:
      500 `failed to create typed patch object (ns/a; /v1, Kind=ConfigMap): .dataa: field not declared in
      schema` (no warning, nothing dropped; a 500 the client retries as transient);
    - anything else the schema refuses (a required field missing, ...) is 422 Invalid.
    MiniClusters are checked against the CRD we generate (422, as the real server's structural schema answers),
    then against its CEL rules (kube_cel.py).
    """
    kind = kind_of(obj)
    name = obj.get("metadata", {}).get("name")
    if kind in (MINICLUSTER, FLUX_MINICLUSTER):
        if kind == MINICLUSTER:
            errors = sorted(_crd_validator().iter_errors(_strip_nulls(obj)), key=lambda e: list(e.path))
            if errors:
                first = errors[0]
                raise ApiError(
                    422,
                    "Invalid",
                    f'{kind.kind}.{kind.group} "{name}" is invalid: {field_path(list(first.path))}: {first.message}',
                )
            refused = refusal(_crd_validator().schema, _strip_nulls(obj), kind.kind, kind.group)
            if refused:  # the CRD's CEL rules (x-kubernetes-validations), after its schema
                raise ApiError(422, "Invalid", refused)
        return obj, []
    stored = copy.deepcopy(obj)
    warnings: list[str] = []
    for _ in range(100):
        problem = _validate_cached(json.dumps(stored, sort_keys=True))
        if problem is None:
            return stored, warnings
        if how == "apply" and problem.validator in ("type", "additionalProperties"):
            meta = obj.get("metadata", {})
            gvk = f"{kind.group}/{kind.version}, Kind={kind.kind}"
            if problem.validator == "type":
                got = f"&value.valueUnstructured{{Value:{problem.instance}}}"
                why = f".{problem.where}: expected {problem.expected}, got {got}"
            else:
                why = f".{field_path([*problem.path, problem.unknown[0]])}: field not declared in schema"
            where = f"{meta.get('namespace')}/{name}" if kind.namespaced else str(name)
            raise ApiError(500, "Error", f"failed to create typed patch object ({where}; {gvk}): {why}")
        if problem.validator == "additionalProperties" and problem.unknown:
            node: Any = stored
            for part in problem.path:
                node = node[part]
            for key in problem.unknown:
                node.pop(key)
                warnings.append(f'unknown field "{field_path([*problem.path, key])}"')
            continue
        if problem.validator == "type":
            got = _JSON_TYPES.get(type(problem.instance), "null")
            field = f"{kind.kind}.{problem.go_field}"
            go = f"json: cannot unmarshal {got} into Go struct field {field} of type {problem.expected}"
            if how == "patch":
                raise ApiError(422, "Invalid", f'"" is invalid: patch: Invalid value: {json.dumps(obj)}: {go}')
            raise ApiError(
                400, "BadRequest", f'{kind.kind} in version "{kind.version}" cannot be handled as a {kind.kind}: {go}'
            )
        if problem.validator == "required":
            missing = problem.message.split("'")[1] if "'" in problem.message else ""
            where = field_path([*problem.path, missing]) if missing else problem.where
            raise ApiError(422, "Invalid", f'{kind.kind} "{name}" is invalid: {where}: Required value')
        raise ApiError(
            422, "Invalid", f'{kind.kind} "{name}" is invalid: {problem.where}: Invalid value: {problem.message}'
        )
    raise AssertionError(f"more than 100 unknown fields in {kind.kind} {name!r}")


def _strip_nulls(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _strip_nulls(v) for k, v in node.items() if v is not None}
    if isinstance(node, list):
        return [_strip_nulls(v) for v in node]
    return node


def check_pod_template(template_spec: PodSpec, where: str) -> None:
    # Pods with restartPolicy Never (Job pods) may only use resizePolicy NotRequired (DOCS_RESIZE:
    # "If the Pod's restartPolicy is Never, container's resize restart policy must be set to NotRequired").
    if template_spec.get("restartPolicy") == "Never":
        # The real server's words (v1.37.2): `Job.batch "never" is invalid: spec.template.spec.containers[0].
        # resizePolicy: Invalid value: "RestartContainer": must be 'NotRequired' when pod `restartPolicy` is 'Never'`.
        for index, container in enumerate(template_spec.get("containers", [])):
            for policy in container.get("resizePolicy") or []:
                if policy.get("restartPolicy") == "RestartContainer":
                    raise ApiError(
                        422,
                        "Invalid",
                        f"{where}.containers[{index}].resizePolicy: Invalid value: "
                        "\"RestartContainer\": must be 'NotRequired' when pod `restartPolicy` is 'Never'",
                    )


def check_update(kind: Kind, old: KubeObject, new: KubeObject) -> None:
    name = old["metadata"]["name"]
    if kind == JOB:
        old_spec, new_spec = old.get("spec", {}), new.get("spec", {})
        # The Job's pod template is immutable once created (DOCS_JOB_TEMPLATE; only a suspended Job's
        # scheduling directives may change, which we never use).
        # The real server names the new value (v1.37.2: `spec.template: Invalid value: {...}: field is immutable`).
        for immutable in ("template", "completionMode", "selector"):
            if old_spec.get(immutable) != new_spec.get(immutable):
                value = json.dumps(new_spec.get(immutable))
                raise ApiError(
                    422,
                    "Invalid",
                    f'Job.batch "{name}" is invalid: spec.{immutable}: Invalid value: {value}: field is immutable',
                )
        # Elastic Indexed Jobs (DOCS_JOB_ELASTIC): completions may change only for completionMode Indexed
        # and only together with parallelism, so that parallelism == completions (the real server's words,
        # v1.37.2: `spec.completions: Invalid value: 3: can only be modified in tandem with spec.parallelism`).
        if old_spec.get("completions") != new_spec.get("completions"):
            indexed = new_spec.get("completionMode") == "Indexed"
            if not indexed:
                raise ApiError(
                    422,
                    "Invalid",
                    f'Job.batch "{name}" is invalid: spec.completions: Invalid value: '
                    f"{new_spec.get('completions')}: field is immutable",
                )
            if new_spec.get("completions") != new_spec.get("parallelism"):
                raise ApiError(
                    422,
                    "Invalid",
                    f'Job.batch "{name}" is invalid: spec.completions: Invalid value: '
                    f"{new_spec.get('completions')}: can only be modified in tandem with spec.parallelism",
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
            # The real server's words (v1.37.2), less the diff it appends; resources included.
            raise ApiError(
                422,
                "Invalid",
                f'Pod "{name}" is invalid: spec: Forbidden: pod updates may not change fields other than '
                "`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,"
                "`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` "
                "(allow it to be set to 1 if it was previously negative)",
            )


def check_resize(old: Pod, new: Pod) -> PodSpec:
    """The pod spec a `resize` patch leaves (DOCS_RESIZE), as the real server (v1.37.2) answers: the resize
    subresource takes only containers' resources and resizePolicy from the patched pod and silently drops any
    other change (an image patched through it stays as it was); resources other than cpu and memory, removing a
    request or a limit, and a change of QoS class are refused with 422 in its words."""
    name = old["metadata"]["name"]
    spec = copy.deepcopy(old["spec"])
    patched = {c["name"]: c for c in new["spec"].get("containers", [])}
    for index, container in enumerate(spec.get("containers", [])):
        after = patched.get(container["name"])
        if after is None:
            continue
        before = container.get("resources") or {}
        resources = copy.deepcopy(after.get("resources") or {})
        sections: tuple[Literal["requests", "limits"], ...] = ("requests", "limits")
        for section in sections:
            old_values, new_values = before.get(section) or {}, resources.get(section) or {}
            changed = {r for r in {*old_values, *new_values} if old_values.get(r) != new_values.get(r)}
            if changed - {"cpu", "memory"}:
                raise ApiError(
                    422,
                    "Invalid",
                    f'Pod "{name}" is invalid: spec: Forbidden: only cpu and memory resources are mutable',
                )
            if set(old_values) - set(new_values):
                raise ApiError(
                    422,
                    "Invalid",
                    f'Pod "{name}" is invalid: spec.containers[{index}].resources.{section}: Forbidden: '
                    f"resource {section} cannot be removed",
                )
        container["resources"] = resources
        if "resizePolicy" in after:
            container["resizePolicy"] = copy.deepcopy(after["resizePolicy"])
    if qos_class(old["spec"]) != qos_class(spec):
        raise ApiError(
            422,
            "Invalid",
            f'Pod "{name}" is invalid: spec: Invalid value: "{qos_class(old["spec"])}": '
            "Pod QOS Class may not change as a result of resizing",
        )
    return spec


def check_resize_fits_node(pod: Pod, node_cpu_millicores: int) -> None:
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
