"""Our CustomResourceDefinition, generated from the pydantic models (never edited by hand).

Pydantic emits JSON Schema with $refs, anyOf-with-null and `additionalProperties: false`; Kubernetes wants
a structural OpenAPI v3 schema: everything inlined, a type on every node, nullable instead of null
branches, and pass-through objects marked x-kubernetes-preserve-unknown-fields.
"""

from __future__ import annotations

import copy
from typing import Any, TypedDict, cast

from miniclusters.api.crd_rules import VALIDATIONS, ValidationRule
from miniclusters.api.spec import API_GROUP, API_VERSION, KIND, MiniClusterSpec
from miniclusters.api.status import MiniClusterStatus
from miniclusters.kube_shapes import Manifest

PLURAL = "miniclusters"
CRD_NAME = f"{PLURAL}.{API_GROUP}"
_DROP_KEYS = {"title", "$defs", "additionalProperties", "examples"}


JsonSchema = TypedDict(
    "JsonSchema",
    {
        "$ref": str,
        "$defs": dict[str, "JsonSchema"],
        "type": str,
        "title": str,
        "description": str,
        "default": Any,  # a field's default: any JSON value the field's type allows
        "const": Any,
        "enum": list[Any],
        "examples": list[Any],
        "properties": dict[str, "JsonSchema"],
        "additionalProperties": "JsonSchema | bool",
        "items": "JsonSchema",
        "anyOf": list["JsonSchema"],
        "required": list[str],
        "minimum": float,
        "maximum": float,
        "minLength": int,
        "maxLength": int,
        "minItems": int,
        "maxItems": int,
        "maxProperties": int,
        "nullable": bool,
        "x-kubernetes-int-or-string": bool,
        "x-kubernetes-preserve-unknown-fields": bool,
        "x-kubernetes-list-type": str,
        "x-kubernetes-validations": list[ValidationRule],
    },
    total=False,
)
"""A JSON Schema node with the keywords pydantic emits for our models and those structural OpenAPI v3 adds."""


def _resolve(node: Any, defs: dict[str, JsonSchema]) -> Any:
    """`node` (pydantic's JSON Schema, or any value inside it) with every $ref replaced by its definition."""
    if isinstance(node, list):
        return [_resolve(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target = copy.deepcopy(defs[node["$ref"].rsplit("/", 1)[-1]])
        merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        return _resolve(merged, defs)
    return {key: _resolve(value, defs) for key, value in node.items()}


def _union(node: JsonSchema, branches: list[JsonSchema]) -> JsonSchema:
    """An anyOf node: Optional[X] is X, nullable; a quantity (integer or string) is int-or-string."""
    out: JsonSchema = {}
    non_null = [b for b in branches if b.get("type") != "null"]
    if len(non_null) < len(branches):
        out["nullable"] = True
    types = {b.get("type") for b in non_null}
    if len(non_null) == 1:
        rest = node.copy()
        del rest["anyOf"]
        inner = _structural({**non_null[0], **rest})
        return {**inner, **out}
    if types <= {"string", "integer", "number"}:
        # A Kubernetes quantity: accepted as an integer or a string, like resource.Quantity.
        out.update({"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]})
        if "description" in node:
            out["description"] = node["description"]
        return out
    raise ValueError(f"cannot express a union of {sorted(map(str, types))} structurally")


def _keywords(node: JsonSchema) -> JsonSchema:
    """The node's own keywords as OpenAPI v3 has them (no titles or defs, `const` as a one-value enum)."""
    kept = {
        ("enum" if key == "const" else key): ([value] if key == "const" else value)
        for key, value in node.items()
        if key not in _DROP_KEYS and key not in ("anyOf", "properties", "items")
        and not (key == "default" and value is None)
    }  # fmt: skip
    out = cast(JsonSchema, kept)  # the node's own keywords, `const` renamed: a JsonSchema still
    if "enum" in out and "type" not in out:
        out["type"] = "string"
    return out


def _structural(node: JsonSchema) -> JsonSchema:
    """Rewrite one resolved JSON Schema node (recursively) into structural OpenAPI v3."""
    branches = node.get("anyOf")
    if branches is not None:
        return _union(node, branches)
    out = _keywords(node)
    kind = out.get("type")
    if kind == "object":
        properties = node.get("properties")
        extra = node.get("additionalProperties")
        if properties:
            out["properties"] = {name: _structural(schema) for name, schema in properties.items()}
        elif isinstance(extra, dict) and extra:
            out["additionalProperties"] = _structural(extra)
        else:
            out["x-kubernetes-preserve-unknown-fields"] = True
    elif kind == "array":
        items = node.get("items") or {}
        out["items"] = _structural(items) if items else {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        out.setdefault("x-kubernetes-list-type", "atomic")
    elif kind is None:
        out["type"] = "object"
        out["x-kubernetes-preserve-unknown-fields"] = True
    return out


def structural_schema(model: type[Any]) -> JsonSchema:
    """The model's JSON Schema as a structural OpenAPI v3 schema."""
    raw = model.model_json_schema(by_alias=True, mode="validation")
    resolved = _resolve(raw, raw.get("$defs", {}))
    return _structural(resolved)


def schema_node(root: JsonSchema, location: str) -> JsonSchema:
    """The node of `root` at a crd_rules location (`spec.containers[].volumes{}`)."""
    node = root
    for part in location.replace("[]", ".[]").replace("{}", ".{}").split(".") if location else ():
        if part == "[]":
            node = node["items"]
        elif part == "{}":
            extra = node["additionalProperties"]
            if not isinstance(extra, dict):
                raise KeyError(location)
            node = extra
        else:
            node = node["properties"][part]
    return node


def build_crd() -> Manifest:
    """The CRD: our group, the MiniCluster kind, status and scale subresources (for kubectl scale / HPA)."""
    spec_schema = structural_schema(MiniClusterSpec)
    status_schema = structural_schema(MiniClusterStatus)
    root: JsonSchema = {
        "type": "object",
        "description": "A Flux MiniCluster: an Indexed Job of brokers joined into one Flux instance.",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            # named so the rules on metadata.name (crd_rules.py) may give it as their fieldPath
            "metadata": {"type": "object", "properties": {"name": {"type": "string"}}},
            "spec": spec_schema,
            "status": status_schema,
        },
        "required": ["spec"],
    }
    for location, rules in VALIDATIONS.items():
        schema_node(root, location)["x-kubernetes-validations"] = rules
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": CRD_NAME, "labels": {"app.kubernetes.io/name": "miniclusters"}},
        "spec": {
            "group": API_GROUP,
            "names": {
                "kind": KIND,
                "listKind": f"{KIND}List",
                "plural": PLURAL,
                "singular": "minicluster",
                "shortNames": ["mc"],
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": API_VERSION,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": root},
                    "subresources": {
                        "status": {},
                        "scale": {
                            "specReplicasPath": ".spec.size",
                            "statusReplicasPath": ".status.size",
                            "labelSelectorPath": ".status.selector",
                        },
                    },
                    "additionalPrinterColumns": [
                        {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
                        {"name": "Ready", "type": "integer", "jsonPath": ".status.readyPods"},
                        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
                        {"name": "Max", "type": "integer", "jsonPath": ".status.maximumSize"},
                        {"name": "Flavour", "type": "string", "jsonPath": ".spec.flux.flavour"},
                        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                    ],
                }
            ],
        },
    }
