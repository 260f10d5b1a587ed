"""The CRD's rules on the API server itself (the fake and the real one, `kube`): each MiniCluster of
testing/crd_cases.py, breaking one check of rules.py alone, is refused by the server with the field paths and
words of `minicluster validate` when crd_coverage.py says the CRD carries that check, and stored when it says
the check cannot be there."""

from __future__ import annotations

from miniclusters.api.crd_coverage import IN_CRD, classification
from miniclusters.backends.kubernetes.api import MINICLUSTER, ApiError
from miniclusters.kube_shapes import KubeObject
from miniclusters.testing.crd_cases import CASES, python_problems, server_problems
from miniclusters.testing.kube_sides import KubeSide


def _answer(kube: KubeSide, manifest: KubeObject) -> list[tuple[str, str]]:
    try:
        kube.api.create(manifest)
    except ApiError as exc:
        assert exc.status == 422, exc
        return server_problems(exc.message)
    kube.api.delete(MINICLUSTER, kube.namespace, manifest["metadata"]["name"])
    return []


def test_the_server_refuses_each_case_as_validate_does_when_the_crd_carries_its_check(kube: KubeSide) -> None:
    wrong = []
    for case in CASES:
        manifest = case.manifest(kube.namespace)
        expected = python_problems(manifest) if classification(case.check) == IN_CRD else []
        answer = _answer(kube, manifest)
        if answer != expected:
            wrong.append((case.check, expected, answer))
    assert not wrong, "\n".join(map(str, wrong))
    assert sum(classification(case.check) == IN_CRD for case in CASES) >= 50
