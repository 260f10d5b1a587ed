"""`minicluster operator install | uninstall | status` against the fake API server: what is applied and in which
order, waiting for the operator (and naming a pod that can never start), uninstall's refusal while MiniClusters
exist, and `kubectl apply -k crds` applying the same objects. The real cluster runs it in tests/e2e."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from miniclusters import __version__
from miniclusters.api.crd import CRD_NAME, build_crd
from miniclusters.backends.kubernetes.api import CONFIG_MAP, CRD, DEPLOYMENT, NAMESPACE, ApiError
from miniclusters.kube_shapes import KubeObject
from miniclusters.operator import install as installer
from miniclusters.operator.manifests import LABELS, NAME
from miniclusters.operator.manifests import NAMESPACE as OPERATOR_NAMESPACE
from miniclusters.render import RenderOptions
from miniclusters.render.options import DEFAULT_REGISTRY
from miniclusters.testing.fake_kube import FakeKube

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = RenderOptions(registry=DEFAULT_REGISTRY, tag=__version__)


class Controllers:
    """What the real apiextensions and Deployment controllers do between two looks: the CRD becomes Established,
    the Deployment gets its pod and, unless the image cannot be used, an available replica."""

    def __init__(self, fake: FakeKube, waiting: str | None = None) -> None:
        self.fake, self.waiting, self.sleeps = fake, waiting, 0

    def sleep(self, _seconds: float) -> None:
        self.sleeps += 1
        for (key, _ns, name), obj in self.fake.objects.items():
            if key.endswith("/CustomResourceDefinition") and name == CRD_NAME:
                obj["status"] = {"conditions": [{"type": "Established", "status": "True"}]}
            if key == "apps/v1/Deployment" and name == NAME:
                replicas = obj["spec"]["replicas"]
                obj["status"] = {} if self.waiting else {"availableReplicas": replicas, "replicas": replicas}
        if not any(k == "v1/Pod" for k, _, _ in self.fake.objects):
            state = {"waiting": {"reason": self.waiting, "message": "image not on the node"}} if self.waiting else {}
            pod: KubeObject = {  # a Pod as the API server keeps it
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"{NAME}-abc", "namespace": OPERATOR_NAMESPACE, "labels": dict(LABELS)},
                "spec": {"containers": [{"name": "operator", "image": COMMITTED.broker_image}]},
            }
            self.fake.objects[("v1/Pod", OPERATOR_NAMESPACE, pod["metadata"]["name"])] = pod
            pod["status"] = {
                "phase": "Pending" if self.waiting else "Running",
                "containerStatuses": [
                    {"name": "operator", "ready": not self.waiting, "restartCount": 0, "state": state}
                ],
            }


def _fake() -> FakeKube:
    fake = FakeKube(namespace="default", crd_installed=False, start_pods=False)
    return fake


def test_install_applies_the_crd_first_then_waits_for_an_available_operator() -> None:
    fake, said = _fake(), list[str]()
    controllers = Controllers(fake)
    objects = installer.install_objects(COMMITTED)
    installer.install(fake, objects, said.append, sleep=controllers.sleep)
    applied = [line.removeprefix("applied ") for line in said if line.startswith("applied ")]
    assert applied[0] == f"CustomResourceDefinition {CRD_NAME}"
    assert applied[1:] == [
        "Namespace miniclusters-system",
        f"ServiceAccount miniclusters-system/{NAME}",
        f"ClusterRole {NAME}",
        f"ClusterRoleBinding {NAME}",
        f"Role miniclusters-system/{NAME}",  # the Lease of leader election only
        f"RoleBinding miniclusters-system/{NAME}",
        f"Deployment miniclusters-system/{NAME}",
    ]
    assert said[-1].startswith("operator available: 2/2 available")
    state = installer.operator_state(fake)
    assert state.available and state.image == COMMITTED.broker_image
    # a second install converges: everything applied again, nothing refused
    installer.install(fake, objects, said.append, sleep=controllers.sleep)
    assert fake.get(DEPLOYMENT, OPERATOR_NAMESPACE, NAME)["spec"]["replicas"] == 2


def test_install_names_a_pod_that_can_never_start() -> None:
    fake = _fake()
    controllers = Controllers(fake, waiting="ErrImageNeverPull")
    with pytest.raises(installer.InstallError) as error:
        installer.install(fake, installer.install_objects(COMMITTED), lambda _: None, sleep=controllers.sleep)
    assert f"pod {NAME}-abc: ErrImageNeverPull image not on the node" in str(error.value)


def test_install_gives_up_after_its_timeout_saying_what_it_waited_for() -> None:
    fake, clock = _fake(), iter(range(0, 10_000, 10))
    controllers = Controllers(fake, waiting="ContainerCreating")
    with pytest.raises(installer.InstallError) as error:
        installer.install(
            fake,
            installer.install_objects(COMMITTED),
            lambda _: None,
            timeout=60,
            clock=lambda: float(next(clock)),
            sleep=controllers.sleep,
        )
    assert "not available within 60s" in str(error.value) and "ContainerCreating" in str(error.value)


def _installed() -> FakeKube:
    fake = _fake()
    installer.install(fake, installer.install_objects(COMMITTED), lambda _: None, sleep=Controllers(fake).sleep)
    fake.crd_installed = True
    return fake


def _minicluster(fake: FakeKube) -> None:
    fake.create(
        {
            "apiVersion": "miniclusters.dev/v1alpha1",
            "kind": "MiniCluster",
            "metadata": {"name": "work", "namespace": "default"},
            "spec": {"size": 1, "containers": [{"image": "ghcr.io/miniclusters/openmpi-openfoam:0.1.0"}]},
        }
    )


def test_uninstall_refuses_while_miniclusters_exist_and_changes_nothing() -> None:
    fake = _installed()
    _minicluster(fake)
    before = sorted(fake.objects)
    with pytest.raises(installer.InstallError) as error:
        installer.uninstall(fake, installer.install_objects(), lambda _: None, sleep=lambda _: None)
    assert "1 MiniCluster(s) still exist (default/work)" in str(error.value)
    assert "--delete-miniclusters" in str(error.value)
    assert sorted(fake.objects) == before


def test_uninstall_removes_everything_install_applied() -> None:
    fake = _installed()
    _minicluster(fake)
    said: list[str] = []
    installer.uninstall(fake, installer.install_objects(), said.append, delete_miniclusters=True, sleep=lambda _: None)
    assert (
        said[0] == f"deleted Deployment miniclusters-system/{NAME}"
        and said[-1] == f"deleted CustomResourceDefinition {CRD_NAME}"
    )
    for kind, ns, name in [
        (DEPLOYMENT, OPERATOR_NAMESPACE, NAME),
        (NAMESPACE, None, OPERATOR_NAMESPACE),
        (CRD, None, CRD_NAME),
    ]:
        with pytest.raises(ApiError) as gone:
            fake.get(kind, ns, name)
        assert gone.value.not_found
    assert not installer.operator_state(fake).deployment
    # nothing left to remove: a second uninstall is a no-op, not an error
    fake.crd_installed = False
    installer.uninstall(fake, installer.install_objects(), said.append, sleep=lambda _: None)


def test_uninstall_keeps_the_namespace_when_it_holds_what_install_did_not_make() -> None:
    """Deleting the namespace would delete a user's objects in it with ours: it is kept, and said so."""
    fake = _installed()
    theirs: KubeObject = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "site-notes", "namespace": "miniclusters-system"},
    }
    fake.create({**theirs, "data": {"notes": "ours, not the operator's"}})
    lease: KubeObject = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease"}
    fake.create({**lease, "metadata": {"name": "miniclusters-operator", "namespace": OPERATOR_NAMESPACE}, "spec": {}})
    said: list[str] = []
    installer.uninstall(fake, installer.removable_objects(), said.append, sleep=lambda _: None)
    assert f"kept Namespace {OPERATOR_NAMESPACE}: it holds what install did not make (ConfigMap site-notes)" in said
    assert fake.get(NAMESPACE, None, OPERATOR_NAMESPACE)
    assert fake.get(CONFIG_MAP, OPERATOR_NAMESPACE, "site-notes")["data"]["notes"] == "ours, not the operator's"
    with pytest.raises(ApiError):
        fake.get(DEPLOYMENT, OPERATOR_NAMESPACE, NAME)


def test_uninstall_also_removes_the_tenants_rbac_and_keeps_their_namespaces() -> None:
    """After `minicluster manifests --tenant alice --tenant team-b=bob | kubectl apply`, uninstall left the
    tenants' ClusterRole behind (seen on the real cluster) and their RoleBindings naming a role that was gone."""
    from miniclusters.backends.kubernetes.api import CLUSTER_ROLE, ROLE_BINDING
    from miniclusters.operator.manifests import build_manifests
    from miniclusters.operator.tenants import TENANT_ROLE, Tenant

    fake = _fake()
    fake.create(build_crd())
    for obj in build_manifests(tenants=[Tenant.parse("alice"), Tenant.parse("team-b=bob")]):
        fake.create(obj)
    theirs: KubeObject = {  # a tenant's own binding, not ours: it stays
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "alice-ci", "namespace": "alice", "labels": {"miniclusters.dev/tenant": "alice"}},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": [{"kind": "User", "name": "ci"}],
    }
    fake.create(theirs)
    fake.crd_installed = True
    said: list[str] = []
    objects = [*installer.removable_objects(), *installer.tenant_objects_in(fake)]
    installer.uninstall(fake, objects, said.append, sleep=lambda _: None)
    # the tenants' bindings first, then their role, then the operator's objects
    bindings = [f"deleted RoleBinding {ns}/{name}" for ns in ("alice", "team-b") for name in (NAME, TENANT_ROLE)]
    assert sorted(said[:4]) == sorted(bindings) and said[4] == f"deleted ClusterRole {TENANT_ROLE}"
    assert said[-1] == f"deleted CustomResourceDefinition {CRD_NAME}"
    assert [b["metadata"]["name"] for b in fake.all_of(ROLE_BINDING)] == ["alice-ci"]
    assert not [r for r in fake.all_of(CLUSTER_ROLE) if r["metadata"]["name"] in (TENANT_ROLE, NAME)]
    for tenant in ("alice", "team-b"):
        assert fake.get(NAMESPACE, None, tenant)  # the tenants' work lives there


def test_status_says_not_installed_and_exits_1(monkeypatch: pytest.MonkeyPatch) -> None:
    from miniclusters.cli import operator_install_commands

    fake = _fake()
    monkeypatch.setattr(operator_install_commands, "_api", lambda _context: fake)
    result = CliRunner().invoke(operator_install_commands.status, [])
    assert result.exit_code == 1
    assert f"CRD {CRD_NAME}: missing" in result.output and "not installed (no Deployment)" in result.output


def test_kubectl_apply_k_crds_applies_what_install_applies() -> None:
    kustomization = yaml.safe_load((ROOT / "crds" / "kustomization.yaml").read_text())
    files: list[dict[str, Any]] = [
        doc
        for path in kustomization["resources"]
        for doc in yaml.safe_load_all((ROOT / "crds" / path).read_text())
        if doc
    ]
    assert files == installer.install_objects(COMMITTED)


@pytest.mark.parametrize(
    ("given", "words"),
    [
        ("relative/path", "the path must be absolute"),
        ("/", "not the node's whole file system"),
        ("=/srv", "the claim's name is empty"),
    ],
)
def test_install_refuses_a_campaign_volume_it_cannot_mount_naming_the_flag(given: str, words: str) -> None:
    from miniclusters.cli import operator_install_commands

    result = CliRunner().invoke(operator_install_commands.install, ["--campaign-volume", given])
    assert result.exit_code == 2 and "--campaign-volume" in result.output and words in result.output


def test_a_campaign_volume_is_a_host_directory_or_a_claim_mounted_at_the_same_path() -> None:
    from miniclusters.operator.manifests import CampaignVolume

    host, claim = CampaignVolume.parse("/srv/campaigns/"), CampaignVolume.parse("shared=/srv/campaigns")
    assert host.volume()["hostPath"] == {"path": "/srv/campaigns", "type": "DirectoryOrCreate"}
    assert claim.volume()["persistentVolumeClaim"] == {"claimName": "shared"} and claim.path == "/srv/campaigns"
