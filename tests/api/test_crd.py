"""The committed CRD is exactly what the models generate, is structural, and accepts what the models accept."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from miniclusters.api import load_minicluster_file
from miniclusters.api.conversion import to_ours
from miniclusters.api.crd import build_crd
from miniclusters.cli.spec_commands import dump_yaml_stream

ROOT = Path(__file__).resolve().parents[2]
CRD_FILE = ROOT / "crds" / "miniclusters.dev_miniclusters.yaml"


def _schema() -> dict[str, Any]:
    return build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def test_committed_crd_matches_the_models() -> None:
    assert CRD_FILE.read_text() == dump_yaml_stream([dict(build_crd())]), "run `make crds` and commit the result"


def test_crd_is_a_valid_kubernetes_object() -> None:
    kubernetes_validate.validate(build_crd(), "1.33", strict=True)


def _walk(node: dict[str, Any], path: str = "") -> list[str]:
    """Structural-schema violations (apiextensions rules) found under node."""
    problems = []
    if "$ref" in node:
        problems.append(f"{path}: $ref is not allowed")
    preserve = node.get("x-kubernetes-preserve-unknown-fields") or node.get("x-kubernetes-int-or-string")
    if "type" not in node and not preserve:
        problems.append(f"{path}: every node needs a type")
    if "properties" in node and "additionalProperties" in node:
        problems.append(f"{path}: properties and additionalProperties are mutually exclusive")
    if node.get("default", 0) is None and not node.get("nullable"):
        problems.append(f"{path}: null default on a non-nullable field")
    for name, child in node.get("properties", {}).items():
        problems += _walk(child, f"{path}.{name}")
    if isinstance(node.get("additionalProperties"), dict):
        problems += _walk(node["additionalProperties"], f"{path}.*")
    if "items" in node:
        problems += _walk(node["items"], f"{path}[]")
    return problems


def test_crd_schema_is_structural() -> None:
    assert _walk(_schema()) == []


def test_pass_through_fields_preserve_unknown_fields() -> None:
    spec = _schema()["properties"]["spec"]["properties"]
    assert spec["pod"]["properties"]["securityContext"]["x-kubernetes-preserve-unknown-fields"] is True
    assert spec["containers"]["items"]["properties"]["securityContext"]["x-kubernetes-preserve-unknown-fields"]
    cpu = spec["containers"]["items"]["properties"]["resources"]["properties"]["requests"]["additionalProperties"]
    assert cpu["x-kubernetes-int-or-string"] is True
    assert spec["size"]["minimum"] == 1 and spec["size"]["default"] == 1


def test_scale_subresource_points_at_size() -> None:
    version = build_crd()["spec"]["versions"][0]
    assert version["subresources"]["scale"]["specReplicasPath"] == ".spec.size"
    assert build_crd()["spec"]["group"] == "miniclusters.dev"  # not flux-framework.org: coexists with the operator


@pytest.mark.parametrize("path", sorted((ROOT / "examples").glob("*.yaml")), ids=lambda p: p.name)
def test_crd_schema_accepts_the_examples(path: Path) -> None:
    obj = to_ours(load_minicluster_file(path))
    jsonschema.validate(obj, _schema())


def test_crd_schema_rejects_a_wrong_type() -> None:
    obj = yaml.safe_load((ROOT / "examples/hello.yaml").read_text())
    obj["spec"]["size"] = "four"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(obj, _schema())
