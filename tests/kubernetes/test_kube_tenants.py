"""One namespace per tenant on Kubernetes: the rendered RBAC lets the operator manage MiniClusters in exactly the
tenant namespaces (proved by running it against the fake API server with RBAC enforced), each tenant user only
in their own, and a MiniCluster renders into its tenant's namespace."""

from __future__ import annotations

from pathlib import Path

import kubernetes_validate
import pytest
from click.testing import CliRunner

from miniclusters.api import load_minicluster_file
from miniclusters.backends.kubernetes.api import JOB, MINICLUSTER, SECRET, ApiError
from miniclusters.backends.kubernetes.objects import custom_resource
from miniclusters.cli import main
from miniclusters.operator.controller import Controller
from miniclusters.operator.manifests import NAME, NAMESPACE, build_manifests
from miniclusters.operator.tenants import Tenant
from miniclusters.render import RenderOptions, render_minicluster
from miniclusters.testing.fake_kube import FakeKube
from miniclusters.testing.fake_rbac import RbacAuthorizer, Subject

ROOT = Path(__file__).resolve().parents[2]
TENANTS = [Tenant.parse("alice"), Tenant.parse("team-b=bob")]
OPERATOR = Subject("ServiceAccount", NAME, NAMESPACE)


def _authorizer(subject: Subject) -> RbacAuthorizer:
    rbac = RbacAuthorizer(subject)
    rbac.add(build_manifests(tenants=TENANTS))
    return rbac


def test_tenant_manifests_pass_the_schema_and_bind_the_operator_only_in_tenant_namespaces() -> None:
    objects = build_manifests(tenants=TENANTS)
    for obj in objects:
        kubernetes_validate.validate(obj, "1.33", strict=True)
    kinds = [(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in objects]
    assert not any(kind == "ClusterRoleBinding" for kind, _, _ in kinds)  # nothing cluster-wide
    for namespace in ("alice", "team-b"):
        assert ("Namespace", None, namespace) in kinds
        assert ("RoleBinding", namespace, NAME) in kinds and ("RoleBinding", namespace, "miniclusters-tenant") in kinds
    args = objects[-1]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--all-namespaces" not in args and args[1:5] == ["--namespace", "alice", "--namespace", "team-b"]


def test_the_operator_reconciles_in_tenant_namespaces_and_is_refused_elsewhere(make_mc) -> None:
    fake = FakeKube(namespace="alice")
    for namespace in ("alice", "team-b", "other"):
        fake.create(custom_resource(make_mc(size=2), namespace))
    fake.authorizer = _authorizer(OPERATOR).allowed  # from here on, RBAC as rendered

    for namespace in ("alice", "team-b"):
        controller = Controller(fake, namespace=namespace)
        controller.start()
        controller.run_until_idle()
        job = fake.stored(JOB, "demo", namespace)
        assert job["metadata"]["namespace"] == namespace and job["spec"]["parallelism"] == 2
        assert fake.stored(MINICLUSTER, "demo", namespace)["status"]["readyPods"] == 2
    with pytest.raises(KeyError):
        fake.stored(JOB, "demo", "other")  # not a tenant: never reconciled
    for scope in ("other", None):  # another namespace, or all namespaces at once: RBAC refuses the list
        with pytest.raises(ApiError) as refused:
            Controller(fake, namespace=scope).start()
        assert refused.value.status == 403


def test_each_tenant_user_manages_minicluster_objects_in_their_own_namespace_only() -> None:
    alice, bob = _authorizer(Subject("User", "alice")), _authorizer(Subject("User", "bob"))
    group, plural = MINICLUSTER.group, MINICLUSTER.plural
    assert alice.allowed("create", group, plural, "alice") and alice.allowed("delete", group, plural, "alice")
    assert not alice.allowed("create", group, plural, "team-b") and not alice.allowed("list", group, plural, None)
    assert bob.allowed("create", group, plural, "team-b") and not bob.allowed("get", group, plural, "alice")
    assert alice.allowed("create", "", "pods/exec", "alice") and alice.allowed("get", "", "pods/log", "alice")
    assert not alice.allowed("get", SECRET.group, SECRET.plural, "alice")  # the curve key is the operator's
    assert not alice.allowed("create", "batch", "jobs", "alice")  # pods only through a MiniCluster


def test_a_minicluster_renders_into_its_tenant_namespace() -> None:
    mc = load_minicluster_file(ROOT / "examples" / "tenants.yaml")
    assert mc.spec.restful.mode == "multi-user"
    for namespace in ("alice", "team-b"):
        objects = render_minicluster(mc, RenderOptions(namespace=namespace))
        for obj in objects:
            kubernetes_validate.validate(obj, "1.33", strict=True)
            assert obj["metadata"]["namespace"] == namespace
        job = objects[-1]
        env = job["spec"]["template"]["spec"]["containers"][0]["env"]
        assert {"name": "FLUX_TOKEN", "valueFrom": {"secretKeyRef": {
            "name": "tenants-restful", "key": "FLUX_TOKEN", "optional": True}}} in env  # fmt: skip


def test_manifests_cli_takes_tenants_and_refuses_bad_ones() -> None:
    runner = CliRunner()
    good = runner.invoke(main, ["manifests", "--tenant", "alice", "--tenant", "team-b=bob"])
    assert good.exit_code == 0 and "kind: RoleBinding" in good.stdout and "ClusterRoleBinding" not in good.stdout
    for bad, words in (("Alice", "DNS label"), ("alice=", "user after '=' is empty"), ("-x", "DNS label")):
        result = runner.invoke(main, ["manifests", "--tenant", bad])
        assert result.exit_code == 2 and "--tenant" in result.stderr and words in result.stderr, result.stderr
    twice = runner.invoke(main, ["manifests", "--tenant", "alice", "--tenant", "alice=carol"])
    assert twice.exit_code == 2 and "twice" in twice.stderr
