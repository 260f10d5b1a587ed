"""The CRD's CEL rules (api/crd_rules.py) say what `minicluster validate` says: over every small combination of
size, minSize, maxSize and autoscale, the rules that fail (evaluated with cel-python on the spec as the API server
defaults it) are exactly the Python rules' problems on those fields, with the same field paths and words."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from miniclusters.api import load_minicluster
from miniclusters.api.crd import build_crd
from miniclusters.api.crd_rules import SPEC
from miniclusters.api.errors import SpecError
from miniclusters.testing.crd_cases import Case, server_problems
from miniclusters.testing.kube_cel import refusal

FIELDS = (
    "spec.minSize",
    "spec.maxSize",
    "spec.autoscale.enabled",
    "spec.multiplexing.total",
    "spec.multiplexing.profileTogether",
    "spec.restful.port",
)
SCHEMA = build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
IMAGE = "ghcr.io/miniclusters/openmpi-openfoam:0.1.0"


def _cel_problems(spec: dict[str, Any]) -> list[tuple[str, str]]:
    """What the API server answers: (field path, message) of each rule that does not hold, on these fields."""
    manifest = Case("", spec).manifest()
    found = server_problems(refusal(SCHEMA, dict(manifest), "MiniCluster", "miniclusters.dev"))
    return [(path, message) for path, message in found if path in FIELDS]


def _python_problems(spec: dict[str, Any]) -> list[tuple[str, str]]:
    data = {"apiVersion": "miniclusters.dev/v1alpha1", "kind": "MiniCluster", "metadata": {"name": "x"}}
    try:
        load_minicluster({**data, "spec": {**spec, "containers": [{"image": IMAGE}]}})
    except SpecError as exc:
        return [(p.path, p.message) for p in exc.problems if p.path in FIELDS]
    return []


def _specs() -> list[dict[str, Any]]:
    out = []
    for size, min_size, max_size, autoscale in itertools.product(
        range(1, 5), range(0, 6), range(0, 6), (None, False, True)
    ):
        spec: dict[str, Any] = {"size": size, "minSize": min_size, "maxSize": max_size}
        if autoscale is not None:
            spec["autoscale"] = {"enabled": autoscale}
        out.append(spec)
    return out


def _other_specs() -> list[dict[str, Any]]:
    """Multiplexing's counts and the REST server's port (each rule reached, and specs that pass)."""
    out: list[dict[str, Any]] = []
    for most, total, together in itertools.product(range(1, 4), range(0, 5), range(1, 5)):
        out.append({"multiplexing": {"max": most, "total": total, "profileTogether": together}})
    out.append({"multiplexing": {}})
    for enabled, port in itertools.product((False, True), (5000, 8050)):
        out.append({"restful": {"enabled": enabled, "port": port}})
    return out


@pytest.mark.parametrize("grid", [_specs, _other_specs])
def test_every_cel_rule_says_what_the_python_rules_say(grid: Any) -> None:
    answers = [(spec, _cel_problems(spec), _python_problems(spec)) for spec in grid()]  # CEL once per spec: ~40 ms each
    disagreements = [answer for answer in answers if sorted(answer[1]) != sorted(answer[2])]
    assert not disagreements, disagreements[:3]
    refused = [spec for spec, cel, _ in answers if cel]
    assert len(refused) > (100 if grid is _specs else 20)  # the grid reaches every rule, not only passing specs
    fields = {path for _, cel, _ in answers for path, _ in cel}
    assert fields == ({"spec.minSize", "spec.maxSize", "spec.autoscale.enabled"} if grid is _specs else set(FIELDS[3:]))


@pytest.mark.parametrize("field", ["minSize", "maxSize", "autoscale", "multiplexing.total", "restful.port"])
def test_the_crd_carries_the_rules_on_spec(field: str) -> None:
    spec = build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["x-kubernetes-validations"] == SPEC
    assert any(field in rule["fieldPath"] for rule in spec["x-kubernetes-validations"])
