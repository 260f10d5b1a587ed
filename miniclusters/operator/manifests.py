"""Deployment manifests for the operator, generated (never edited by hand): namespace, ServiceAccount,
least-privilege RBAC, Deployment. The CRD itself is crds/miniclusters.dev_miniclusters.yaml.

RBAC grants exactly the verbs the controller uses: it reads and updates MiniClusters and their status, creates
and patches the rendered objects (server-side apply of a missing object needs create as well as patch),
reads pods, and writes Events. It execs into pods (pods/exec) for the autoscaler's queue (`flux resource demand` /
`drain`) and the multiplexing controller's Flux jobs and files; it resizes pods in place (pods/resize, patch only)
for the multiplexing controller; it never deletes rendered objects (owner references let the garbage collector
do that).
"""

from __future__ import annotations

from dataclasses import dataclass

from miniclusters.api.crd import PLURAL
from miniclusters.api.spec import API_GROUP, FLUX_OPERATOR_API_VERSION
from miniclusters.kube_shapes import (
    ContainerPort,
    ContainerSecurityContext,
    Manifest,
    ObjectMeta,
    PodSecurityContext,
    PodVolume,
    PolicyRule,
    VolumeMount,
)
from miniclusters.operator.metrics_api import PORT as METRICS_PORT
from miniclusters.operator.metrics_api import TLS_DIR as METRICS_TLS_DIR
from miniclusters.operator.metrics_api import TLS_SECRET as METRICS_TLS_SECRET
from miniclusters.operator.tenants import Tenant, tenant_objects
from miniclusters.render.options import RenderOptions

NAMESPACE = "miniclusters-system"
NAME = "miniclusters-operator"
LABELS = {"app.kubernetes.io/name": NAME, "app.kubernetes.io/part-of": "miniclusters"}
READY_FILE_ENV = "MINICLUSTERS_OPERATOR_READY_FILE"
"""Where the operator says it is ready (its controllers built, the CRD found): the Deployment's readiness probe."""
READY_FILE = "/tmp/operator.ready"
REPLICAS = 2
LEASE_NAME = "miniclusters-operator"
"""The Lease the replicas elect their leader with (operator/leader.py)."""


def rbac_rules(accept_flux_kind: bool = False) -> list[PolicyRule]:
    groups = [API_GROUP] + ([FLUX_OPERATOR_API_VERSION.split("/")[0]] if accept_flux_kind else [])
    return [
        {"apiGroups": groups, "resources": [PLURAL], "verbs": ["get", "list", "watch", "delete"]},
        {"apiGroups": groups, "resources": [f"{PLURAL}/status"], "verbs": ["get", "update", "patch"]},
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "list", "watch", "create", "patch"]},
        {"apiGroups": [""], "resources": ["secrets", "configmaps", "services"], "verbs": ["get", "create", "patch"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
        # Exec is a websocket GET: authorized as `get` before Kubernetes 1.35, as `create` from 1.35 on.
        {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["get", "create"]},
        # The multiplexing controller's in-place resizes (KEP-1287: the resize subresource since 1.33).
        {"apiGroups": [""], "resources": ["pods/resize"], "verbs": ["patch"]},
        {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
    ]


def lease_rbac(meta: ObjectMeta) -> list[Manifest]:
    """A Role in the operator's own namespace for leader election: create the Lease (create cannot be limited to
    one name), then read and renew only that one. Nothing else of that namespace, nothing of any other."""
    rules: list[PolicyRule] = [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": [LEASE_NAME],
            "verbs": ["get", "update"],
        },
    ]
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": NAME, **meta},
            "rules": rules,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": NAME, **meta},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": NAME},
            "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}],
        },
    ]


@dataclass(frozen=True)
class CampaignVolume:
    """The volume the operator shares with the pods of its campaigns (spec.campaign.workdir lives on it), mounted
    at the same path: a directory of the node (one-node clusters) or a ReadWriteMany claim."""

    path: str
    claim: str | None = None

    @classmethod
    def parse(cls, text: str) -> CampaignVolume:
        """`PATH` (a hostPath) or `CLAIM=PATH`; ValueError naming what is wrong."""
        claim, _, path = text.rpartition("=")
        if not path.startswith("/"):
            raise ValueError(f"{text!r}: the path must be absolute (PATH or CLAIM=PATH)")
        if path.rstrip("/") == "":
            raise ValueError(f"{text!r}: not the node's whole file system; name a directory")
        if "=" in text and not claim:
            raise ValueError(f"{text!r}: the claim's name is empty (CLAIM=PATH)")
        return cls(path.rstrip("/"), claim or None)

    def volume(self) -> PodVolume:
        if self.claim:
            return {"name": "campaigns", "persistentVolumeClaim": {"claimName": self.claim}}
        return {"name": "campaigns", "hostPath": {"path": self.path, "type": "DirectoryOrCreate"}}


def _security(campaign_volume: CampaignVolume | None) -> tuple[PodSecurityContext, ContainerSecurityContext]:
    """(the pod's, the container's) securityContext. With a campaign volume the operator runs as uid 0 (still
    without any capability, privilege escalation or a writable root): the application pods write the cases as
    root, and the operator reruns members and writes the campaign's event log among them."""
    container: ContainerSecurityContext = {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsUser": 65532,
        "capabilities": {"drop": ["ALL"]},
    }
    pod: PodSecurityContext = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    if campaign_volume is not None:
        container["runAsUser"] = 0
        pod["runAsNonRoot"] = False
    return pod, container


def build_manifests(
    options: RenderOptions | None = None,
    accept_flux_kind: bool = False,
    tenants: list[Tenant] | None = None,
    campaign_volume: CampaignVolume | None = None,
    custom_metrics: bool = False,
) -> list[Manifest]:
    """Namespace, ServiceAccount, ClusterRole, ClusterRoleBinding, the Lease's Role and RoleBinding, Deployment
    (two replicas electing a leader).

    With `tenants` the operator is bound in their namespaces only (RoleBindings; tenants.py) and watches those."""
    options = options or RenderOptions()
    if tenants:
        scope = [arg for t in tenants for arg in ("--namespace", t.namespace)]
        binding = tenant_objects(tenants, NAME, NAME, NAMESPACE, LABELS)
    else:
        scope = ["--all-namespaces"]
        binding = [
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": NAME, "labels": LABELS},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NAME},
                "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}],
            }
        ]
    args = ["operator", *scope, "--registry", options.registry, "--tag", options.tag, "--leader-elect"]
    if accept_flux_kind:
        args.append("--accept-flux-operator-kind")
    ports: list[ContainerPort] = []
    if custom_metrics:  # metrics_api.py: the custom metrics API behind the aggregator, on every replica
        args += ["--custom-metrics-port", str(METRICS_PORT), "--custom-metrics-tls", METRICS_TLS_DIR]
        ports.append({"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"})
    meta: ObjectMeta = {"namespace": NAMESPACE, "labels": LABELS}
    pod_security, container_security = _security(campaign_volume)
    mounts: list[VolumeMount] = [{"name": "tmp", "mountPath": "/tmp"}]
    volumes: list[PodVolume] = [{"name": "tmp", "emptyDir": {}}]
    if campaign_volume is not None:
        mounts.append({"name": "campaigns", "mountPath": campaign_volume.path})
        volumes.append(campaign_volume.volume())
    if custom_metrics:
        mounts.append({"name": "metrics-tls", "mountPath": METRICS_TLS_DIR, "readOnly": True})
        volumes.append({"name": "metrics-tls", "secret": {"secretName": METRICS_TLS_SECRET}})
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE, "labels": LABELS}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": NAME, **meta}},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": NAME, "labels": LABELS},
            "rules": rbac_rules(accept_flux_kind),
        },
        *binding,
        *lease_rbac(meta),
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": NAME, **meta},
            "spec": {
                # Two replicas: one leads (the Lease), the other takes over within seconds when it is gone.
                "replicas": REPLICAS,
                "selector": {"matchLabels": LABELS},
                "template": {
                    "metadata": {"labels": LABELS},
                    "spec": {
                        "serviceAccountName": NAME,
                        "securityContext": pod_security,
                        "containers": [
                            {
                                "name": "operator",
                                # The broker image carries our whole package in a self-contained environment.
                                "image": options.broker_image,
                                "command": ["/opt/miniclusters/env/bin/minicluster"],
                                "args": args,
                                "env": [
                                    {"name": "PYTHONUNBUFFERED", "value": "1"},
                                    {"name": READY_FILE_ENV, "value": READY_FILE},
                                    # The replica's name in the Lease, and where the Lease is.
                                    {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                                    {
                                        "name": "POD_NAMESPACE",
                                        "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
                                    },
                                ],
                                # Ready once its controllers run (the file), not merely once its process exists.
                                "readinessProbe": {
                                    "exec": {"command": ["/bin/sh", "-c", f"test -f {READY_FILE}"]},
                                    "periodSeconds": 2,
                                },
                                # The root file system is read-only: temporary files (the multiplexing
                                # controller's logs, matplotlib's cache) go to a volume of the pod's own.
                                "ports": ports,
                                "volumeMounts": mounts,
                                "resources": {"requests": {"cpu": "50m", "memory": "128Mi"}},
                                "securityContext": container_security,
                            }
                        ],
                        "volumes": volumes,
                    },
                },
            },
        },
    ]
