"""The thin API layer the backend and the operator talk to: a real one over the official client, a fake in memory.

Only generic verbs on (apiVersion, kind) plus the two streaming calls (exec, logs) and watch: enough for
server-side apply, status and scale updates, the pod `resize` subresource, and nothing more to fake.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from miniclusters.api.crd import PLURAL
from miniclusters.api.spec import API_GROUP, API_VERSION, FLUX_OPERATOR_API_VERSION
from miniclusters.backends.base import ExecResult
from miniclusters.errors import MiniclustersError
from miniclusters.kube_shapes import AnyObject, KubeObject

PatchType = Literal["merge", "strategic", "json"]
CONTENT_TYPES: Mapping[str, str] = {
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "json": "application/json-patch+json",
    "apply": "application/apply-patch+yaml",
}


@dataclass(frozen=True)
class Kind:
    """Where a kind lives in the REST API."""

    api_version: str
    kind: str
    plural: str
    namespaced: bool = True

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def version(self) -> str:
        return self.api_version.rpartition("/")[2]

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        """`/api/v1/namespaces/ns/pods/name/resize` and friends; no namespace means all namespaces."""
        root = f"/apis/{self.api_version}" if self.group else f"/api/{self.api_version}"
        if self.namespaced and namespace:
            root += f"/namespaces/{namespace}"
        out = f"{root}/{self.plural}"
        if name:
            out += f"/{name}"
            if subresource:
                out += f"/{subresource}"
        return out


SECRET = Kind("v1", "Secret", "secrets")
CONFIG_MAP = Kind("v1", "ConfigMap", "configmaps")
SERVICE = Kind("v1", "Service", "services")
POD = Kind("v1", "Pod", "pods")
NAMESPACE = Kind("v1", "Namespace", "namespaces", namespaced=False)
NODE = Kind("v1", "Node", "nodes", namespaced=False)
SERVICE_ACCOUNT = Kind("v1", "ServiceAccount", "serviceaccounts")
JOB = Kind("batch/v1", "Job", "jobs")
EVENT = Kind("events.k8s.io/v1", "Event", "events")
DEPLOYMENT = Kind("apps/v1", "Deployment", "deployments")
CLUSTER_ROLE = Kind("rbac.authorization.k8s.io/v1", "ClusterRole", "clusterroles", namespaced=False)
ROLE = Kind("rbac.authorization.k8s.io/v1", "Role", "roles")
ROLE_BINDING = Kind("rbac.authorization.k8s.io/v1", "RoleBinding", "rolebindings")
CLUSTER_ROLE_BINDING = Kind("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "clusterrolebindings", False)
API_SERVICE = Kind("apiregistration.k8s.io/v1", "APIService", "apiservices", namespaced=False)
LEASE = Kind("coordination.k8s.io/v1", "Lease", "leases")
CRD = Kind("apiextensions.k8s.io/v1", "CustomResourceDefinition", "customresourcedefinitions", namespaced=False)
MINICLUSTER = Kind(f"{API_GROUP}/{API_VERSION}", "MiniCluster", PLURAL)
FLUX_MINICLUSTER = Kind(FLUX_OPERATOR_API_VERSION, "MiniCluster", "miniclusters")

KINDS: tuple[Kind, ...] = (
    SECRET,
    CONFIG_MAP,
    SERVICE,
    POD,
    NAMESPACE,
    SERVICE_ACCOUNT,
    JOB,
    EVENT,
    DEPLOYMENT,
    CLUSTER_ROLE,
    CLUSTER_ROLE_BINDING,
    ROLE,
    ROLE_BINDING,
    CRD,
    LEASE,
    API_SERVICE,
    MINICLUSTER,
    FLUX_MINICLUSTER,
)


def kind_of(obj: AnyObject) -> Kind:
    for kind in KINDS:
        if kind.api_version == obj.get("apiVersion") and kind.kind == obj.get("kind"):
            return kind
    raise ValueError(f"unsupported kind {obj.get('apiVersion')}/{obj.get('kind')}")


class ApiError(MiniclustersError):
    """A failed API call: the HTTP status and the server's reason and message (a metav1.Status)."""

    def __init__(self, status: int, reason: str, message: str, causes: tuple[str, ...] = ()) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.causes = causes
        """The Status's details.causes[].reason (StatusCause.Type): why, for a machine (NodeCapacity on a refused
        resize)."""

    @property
    def transient(self) -> bool:
        """Worth retrying with back-off: throttling (429), server errors (5xx), lost connections (0)."""
        return self.status in (0, 429) or self.status >= 500

    @property
    def conflict(self) -> bool:
        return self.status == 409

    @property
    def not_found(self) -> bool:
        return self.status == 404


@dataclass(frozen=True)
class WatchEvent:
    type: str
    """ADDED, MODIFIED, DELETED, BOOKMARK or ERROR."""
    object: KubeObject


class KubeApi(Protocol):
    """The verbs we use. Objects are plain dicts exactly as the API serves them (camelCase), typed as the generic
    KubeObject: a caller that reads one kind's spec or status casts once where the object comes back."""

    namespace: str
    """The default namespace (kubeconfig context, or the pod's own when in-cluster)."""

    def get(self, kind: Kind, namespace: str | None, name: str) -> KubeObject: ...

    def list_objects(
        self, kind: Kind, namespace: str | None, label_selector: str | None = None
    ) -> tuple[list[KubeObject], str]:
        """Items and the list's resourceVersion (to start a watch from)."""
        ...

    def create(self, obj: KubeObject) -> KubeObject: ...

    def apply(self, obj: KubeObject, field_manager: str, force: bool = True) -> KubeObject:
        """Server-side apply (PATCH, application/apply-patch+yaml)."""
        ...

    def patch(
        self,
        kind: Kind,
        namespace: str | None,
        name: str,
        body: Any,
        patch_type: PatchType = "merge",
        subresource: str | None = None,
        field_manager: str | None = None,
    ) -> KubeObject: ...

    def replace(self, obj: KubeObject, subresource: str | None = None) -> KubeObject:
        """PUT: optimistic concurrency through metadata.resourceVersion (409 when stale)."""
        ...

    def delete(self, kind: Kind, namespace: str | None, name: str, propagation: str = "Background") -> None: ...

    def watch(
        self,
        kind: Kind,
        namespace: str | None,
        resource_version: str,
        timeout_seconds: int = 60,
        label_selector: str | None = None,
    ) -> Iterator[WatchEvent]: ...

    def served_resources(self, api_version: str) -> set[str]:
        """Plural resource names served for apiVersion; ApiError 404 when the group/version is not served."""
        ...

    def exec(
        self, namespace: str, pod: str, container: str | None, argv: list[str], timeout: float = 60.0
    ) -> ExecResult: ...

    def logs(self, namespace: str, pod: str, container: str | None, follow: bool = False) -> Iterator[str]: ...
