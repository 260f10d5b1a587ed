"""Every check of rules.py is classified (api/crd_coverage.py), and the classification holds: for a MiniCluster
breaking one check alone (testing/crd_cases.py), the CRD's rules, evaluated as the API server would (cel-python,
on the schema's defaults), refuse it with the same field paths and words as `minicluster validate` when the
check is in the CRD, and accept it when it is not. tests/kubernetes/test_kube_crd_cases.py sends the same
MiniClusters to the fake and the real API server."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

from miniclusters.api import burst_rules, rules, run_rules
from miniclusters.api.crd import build_crd
from miniclusters.api.crd_coverage import CHECKS, IN_CRD, SERVER, check_ids, classification
from miniclusters.api.spec import OUR_API_VERSION
from miniclusters.testing.crd_cases import CASES, Case, python_problems, server_problems
from miniclusters.testing.kube_cel import refusal

SCHEMA = build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def _problem_calls(module: object) -> dict[str, int]:
    tree = ast.parse(Path(str(getattr(module, "__file__", ""))).read_text())
    out = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            calls = [n for n in ast.walk(node) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "Problem"]
            if calls:
                out[node.name] = len(calls)
    return out


def test_every_check_that_yields_a_problem_is_classified() -> None:
    found = {**_problem_calls(rules), **_problem_calls(run_rules), **_problem_calls(burst_rules)}
    assert found == {function: len(checks) for function, checks in CHECKS.items()}


def test_every_classified_check_has_a_case_breaking_it() -> None:
    cased = {case.check for case in CASES}
    assert cased <= set(check_ids())
    assert set(check_ids()) - set(check_ids(SERVER)) <= cased


def _cel(case: Case) -> list[tuple[str, str]]:
    return server_problems(refusal(SCHEMA, dict(case.manifest()), "MiniCluster", "miniclusters.dev"))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.check)
def test_the_crd_refuses_what_validate_refuses_for_the_checks_it_carries(case: Case) -> None:
    python = python_problems(case.manifest())
    assert python, f"{case.check}: validate accepts the case"
    if classification(case.check) == IN_CRD:
        assert _cel(case) == python
    else:
        assert _cel(case) == [], f"{case.check} is classified {classification(case.check)!r} but the CRD refuses it"


@pytest.mark.parametrize("path", sorted(Path("examples").glob("*.yaml")), ids=lambda p: p.name)
def test_the_crd_accepts_every_example(path: Path) -> None:
    for manifest in yaml.safe_load_all(path.read_text()):
        if isinstance(manifest, dict) and manifest.get("apiVersion") == OUR_API_VERSION and "spec" in manifest:
            assert refusal(SCHEMA, manifest, "MiniCluster", "miniclusters.dev") is None
