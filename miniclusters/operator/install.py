"""`minicluster operator install | uninstall | status`: the operator put into a cluster, and taken out, through the
API (server-side apply under our field manager), as `kubectl apply -k crds` does for people who prefer kubectl.

What is installed is a pure list (`install_objects`: the CRD, then `build_manifests`); the functions below only
apply, wait and read. Uninstall refuses while MiniClusters exist unless told to delete them: deleting the CRD
deletes every MiniCluster, and with it every running job (nothing accepted is lost silently).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypedDict

from miniclusters.api.crd import CRD_NAME, build_crd
from miniclusters.backends.kubernetes.api import (
    CONFIG_MAP,
    CRD,
    DEPLOYMENT,
    JOB,
    LEASE,
    MINICLUSTER,
    POD,
    ROLE,
    ROLE_BINDING,
    SECRET,
    SERVICE,
    SERVICE_ACCOUNT,
    ApiError,
    KubeApi,
    kind_of,
)
from miniclusters.backends.wait import NEVER_STARTS as NEVER_STARTS_UP
from miniclusters.errors import MiniclustersError
from miniclusters.kube_shapes import KubeObject, Manifest
from miniclusters.operator.manifests import LABELS, LEASE_NAME, NAME, NAMESPACE, CampaignVolume, build_manifests
from miniclusters.operator.metrics_api import MetricsTLS, metrics_objects
from miniclusters.operator.tenants import RBAC_API, TENANT_LABEL, TENANT_ROLE
from miniclusters.render.options import RenderOptions

FIELD_MANAGER = "miniclusters-install"
"""Who owns the installed fields (server-side apply): `install` again takes them back with force."""
SELECTOR = ",".join(f"{k}={v}" for k, v in LABELS.items())


class InstallError(MiniclustersError):
    """The operator could not be installed, found or removed: what and why, in the server's words."""


def install_objects(
    options: RenderOptions | None = None,
    accept_flux_kind: bool = False,
    campaign_volume: CampaignVolume | None = None,
    metrics_tls: MetricsTLS | None = None,
) -> list[Manifest]:
    """Everything `install` applies, in order: the CRD first (the operator checks it at start), then the
    namespace, ServiceAccount, RBAC and Deployment; with ``metrics_tls``, the custom metrics API's Secret and
    Service before the Deployment and its APIService after it."""
    manifests = build_manifests(
        options, accept_flux_kind, campaign_volume=campaign_volume, custom_metrics=metrics_tls is not None
    )
    if metrics_tls is None:
        return [build_crd(), *manifests]
    secret, service, api_service = metrics_objects(NAMESPACE, LABELS, LABELS, metrics_tls)
    return [build_crd(), *manifests[:-1], secret, service, manifests[-1], api_service]


def removable_objects() -> list[Manifest]:
    """What `uninstall` deletes, in install order: everything any install may have made."""
    secret, service, api_service = metrics_objects(NAMESPACE, LABELS, LABELS, None)
    manifests = build_manifests()
    return [build_crd(), *manifests[:-1], secret, service, manifests[-1], api_service]


def tenant_objects_in(api: KubeApi) -> list[Manifest]:
    """What `minicluster manifests --tenant` made beside install's objects, in the order it applies them: the
    tenants' ClusterRole, then the RoleBindings in each tenant's namespace (found by their label). The tenants'
    namespaces stay: they hold the tenants' own work. Uninstall deletes these too, before the operator's role."""
    selector = f"{TENANT_LABEL},app.kubernetes.io/part-of={LABELS['app.kubernetes.io/part-of']}"
    bindings, _ = _call("listing the tenants' RoleBindings", lambda: api.list_objects(ROLE_BINDING, None, selector))
    role: Manifest = {"apiVersion": RBAC_API, "kind": "ClusterRole", "metadata": {"name": TENANT_ROLE}}
    found: list[Manifest] = [
        {"apiVersion": RBAC_API, "kind": "RoleBinding", "metadata": {"name": b["metadata"]["name"], "namespace": ns}}
        for b in bindings
        if (ns := b["metadata"].get("namespace"))
    ]
    return [role, *found]


def _label(obj: Manifest) -> str:
    meta = obj["metadata"]
    where = f"{meta['namespace']}/" if meta.get("namespace") else ""
    return f"{obj['kind']} {where}{meta['name']}"


def _call(what: str, call: Callable[[], Any]) -> Any:
    try:
        return call()
    except ApiError as exc:
        raise InstallError(f"{what}: {exc.status} {exc.reason}: {exc.message}") from None


def _established(api: KubeApi) -> bool:
    crd = api.get(CRD, None, CRD_NAME)
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


def install(
    api: KubeApi,
    objects: list[Manifest],
    say: Callable[[str], None],
    timeout: float = 180.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Apply each object (server-side, forced: a second install converges), then wait for the CRD to be served
    and the Deployment to have an available replica; a pod that cannot start is named with its reason."""
    deadline = clock() + timeout
    for obj in objects:
        _call(f"applying {_label(obj)}", functools.partial(api.apply, obj, FIELD_MANAGER, force=True))
        say(f"applied {_label(obj)}")
        if obj["kind"] == "CustomResourceDefinition":
            while not _call("reading the CRD", lambda: _established(api)):
                if clock() > deadline:
                    raise InstallError(f"the CRD {CRD_NAME} was not Established within {timeout:.0f}s")
                sleep(0.5)
    said = ""
    while True:
        state = _call("reading the operator's Deployment", lambda: operator_state(api))
        if state.available and state.available_replicas >= state.replicas:  # the leader and its standby
            say(f"operator available: {state.summary()}")
            return
        if state.summary() != said:
            said = state.summary()
            say(f"waiting for the operator: {said}")
        if state.stuck:
            raise InstallError(f"the operator's pod cannot start: {state.stuck}")
        if clock() > deadline:
            raise InstallError(f"the operator was not available within {timeout:.0f}s: {said}")
        sleep(1.0)


# What `up` stops at (backends/wait.py), and an image the node keeps failing to pull: the operator's image is ours.
NEVER_STARTS = NEVER_STARTS_UP | {"ImagePullBackOff"}


class PodRow(TypedDict):
    """An operator pod as `operator status` shows it."""

    name: str
    reason: str
    message: str
    restarts: int


@dataclass
class OperatorState:
    """What `status` shows: the CRD, the Deployment's replicas and each operator pod."""

    crd: bool = False
    deployment: bool = False
    image: str | None = None
    replicas: int = 0
    available_replicas: int = 0
    pods: list[PodRow] = field(default_factory=list)
    leader: str = ""
    """The replica holding the Lease (operator/leader.py): '' when none leads."""

    @property
    def available(self) -> bool:
        return self.crd and self.deployment and self.available_replicas >= 1

    @property
    def stuck(self) -> str | None:
        for pod in self.pods:
            if pod["reason"] in NEVER_STARTS or (pod["reason"] == "CrashLoopBackOff" and pod["restarts"] >= 2):
                why = f"pod {pod['name']}: {pod['reason']} {pod['message']}".rstrip()
                return f"{why} (see: kubectl logs -n {NAMESPACE} {pod['name']} --previous)"
        return None

    def summary(self) -> str:
        if not self.deployment:
            return "not installed (no Deployment)"
        pods = ", ".join(f"{p['name']} {p['reason']}" for p in self.pods) or "no pods yet"
        return f"{self.available_replicas}/{self.replicas} available; {pods}"


def _pod_row(pod: KubeObject) -> PodRow:
    status = pod.get("status") or {}
    containers = status.get("containerStatuses") or []
    reason, message = status.get("phase", "Pending"), ""
    for container in containers:
        waiting = (container.get("state") or {}).get("waiting")
        if waiting:
            reason, message = waiting.get("reason", reason), waiting.get("message", "")
    ready = all(c.get("ready") for c in containers) and bool(containers)
    return {
        "name": pod["metadata"]["name"],
        "reason": "Ready" if ready else reason,
        "message": message,
        "restarts": sum(int(c.get("restartCount") or 0) for c in containers),
    }


def operator_state(api: KubeApi) -> OperatorState:
    state = OperatorState()
    try:
        state.crd = _established(api)
    except ApiError as exc:
        if not exc.not_found:
            raise
    try:
        deployment = api.get(DEPLOYMENT, NAMESPACE, NAME)
    except ApiError as exc:
        if exc.not_found:
            return state
        raise
    state.deployment = True
    spec, status = deployment.get("spec") or {}, deployment.get("status") or {}
    state.image = spec["template"]["spec"]["containers"][0].get("image")
    state.replicas = int(spec.get("replicas") or 0)
    state.available_replicas = int(status.get("availableReplicas") or 0)
    pods, _ = api.list_objects(POD, NAMESPACE, SELECTOR)
    state.pods = [_pod_row(p) for p in pods if not p["metadata"].get("deletionTimestamp")]
    try:
        lease = api.get(LEASE, NAMESPACE, LEASE_NAME)
        state.leader = str((lease.get("spec") or {}).get("holderIdentity") or "")
    except ApiError as exc:
        if not exc.not_found:
            raise
    return state


FOREIGN_KINDS = (DEPLOYMENT, POD, SERVICE, CONFIG_MAP, SECRET, SERVICE_ACCOUNT, JOB, ROLE, ROLE_BINDING, LEASE)
"""What a user may have put into the operator's namespace (deleting the namespace would delete it with ours)."""
KUBERNETES_MADE = {("ConfigMap", "kube-root-ca.crt"), ("ServiceAccount", "default")}


def foreign_objects(api: KubeApi, namespace: str) -> list[str]:
    """`Kind name` of each object in ``namespace`` that is not ours (our labels, or the Lease of our replicas)
    nor one Kubernetes puts in every namespace."""
    out = []
    for kind in FOREIGN_KINDS:
        try:
            items, _ = api.list_objects(kind, namespace)
        except ApiError as exc:
            if exc.not_found:
                continue
            raise InstallError(f"listing {kind.plural} in {namespace}: {exc.status} {exc.reason}") from None
        for item in items:
            meta = item.get("metadata") or {}
            labels = meta.get("labels") or {}
            ours = labels.get("app.kubernetes.io/part-of") == LABELS["app.kubernetes.io/part-of"]
            ours = ours or (kind == LEASE and meta.get("name") == LEASE_NAME)
            if not ours and (kind.kind, meta.get("name")) not in KUBERNETES_MADE and not meta.get("deletionTimestamp"):
                out.append(f"{kind.kind} {meta.get('name')}")
    return out


def uninstall(
    api: KubeApi,
    objects: list[Manifest],
    say: Callable[[str], None],
    delete_miniclusters: bool = False,
    timeout: float = 180.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Delete what install applied, the Deployment first and the CRD last, and wait until each is gone. With
    MiniClusters left, refuse (naming them) unless ``delete_miniclusters``: the CRD's deletion would delete them.
    The namespace is kept (and said so) when it holds something install did not make."""
    try:
        left, _ = api.list_objects(MINICLUSTER, None)
    except ApiError as exc:
        if not exc.not_found:
            raise InstallError(f"listing MiniClusters: {exc.status} {exc.reason}: {exc.message}") from None
        left = []
    if left and not delete_miniclusters:
        names = ", ".join(f"{m['metadata']['namespace']}/{m['metadata']['name']}" for m in left)
        raise InstallError(
            f"{len(left)} MiniCluster(s) still exist ({names}): delete them first, or give --delete-miniclusters "
            "(uninstalling deletes the CRD, and with it every MiniCluster and its running jobs)"
        )
    deadline = clock() + timeout
    for obj in reversed(objects):
        kind, meta = kind_of(obj), obj["metadata"]
        if obj["kind"] == "Namespace" and (foreign := foreign_objects(api, meta["name"])):
            shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
            say(f"kept Namespace {meta['name']}: it holds what install did not make ({shown})")
            continue
        try:
            api.delete(kind, meta.get("namespace"), meta["name"], "Foreground")
        except ApiError as exc:
            if exc.not_found:
                continue
            raise InstallError(f"deleting {_label(obj)}: {exc.status} {exc.reason}: {exc.message}") from None
        while True:
            try:
                api.get(kind, meta.get("namespace"), meta["name"])
            except ApiError as exc:
                if exc.not_found:
                    break
                raise InstallError(f"reading {_label(obj)}: {exc.status} {exc.reason}: {exc.message}") from None
            if clock() > deadline:
                raise InstallError(f"{_label(obj)} was not gone within {timeout:.0f}s")
            sleep(0.5)
        say(f"deleted {_label(obj)}")
