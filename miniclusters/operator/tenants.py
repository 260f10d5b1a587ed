"""One namespace per tenant: the objects that let the operator manage MiniClusters in exactly those namespaces,
and let each tenant manage their own MiniClusters there and nowhere else.

Instead of a ClusterRoleBinding (every namespace), each tenant namespace gets a RoleBinding of the operator's
ClusterRole to its ServiceAccount: a RoleBinding that references a ClusterRole grants its rules only inside the
binding's namespace (https://kubernetes.io/docs/reference/access-authn-authz/rbac/#rolebinding-and-clusterrolebinding),
so one role definition serves every tenant. The operator then watches only those namespaces (`--namespace`,
repeated), since a namespace-scoped grant cannot list across all of them. Each tenant's Kubernetes user gets the
`miniclusters-tenant` ClusterRole the same way: MiniClusters, and reading what the operator made of them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from miniclusters.api.crd import PLURAL
from miniclusters.api.spec import API_GROUP
from miniclusters.errors import MiniclustersError
from miniclusters.kube_shapes import Manifest, PolicyRule

RBAC_API = "rbac.authorization.k8s.io/v1"
TENANT_ROLE = "miniclusters-tenant"
TENANT_LABEL = "miniclusters.dev/tenant"  # on each tenant's Namespace and RoleBindings: the namespace it is for
# RFC 1123 label: what Kubernetes accepts as a namespace name
NAMESPACE_PATTERN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


class TenantError(MiniclustersError, ValueError):
    """A tenant that cannot be rendered (names the flag and the value)."""


@dataclass(frozen=True)
class Tenant:
    """A namespace of its own and the Kubernetes user (as the API server authenticates them) who owns it."""

    namespace: str
    user: str

    @classmethod
    def parse(cls, text: str) -> Tenant:
        """`NAMESPACE` (the user has the same name) or `NAMESPACE=USER`."""
        namespace, _, user = text.partition("=")
        if not NAMESPACE_PATTERN.fullmatch(namespace) or len(namespace) > 63:
            raise TenantError(
                f"--tenant {text!r}: namespace {namespace!r} must be a DNS label (lower-case letters, digits and "
                "'-', at most 63 characters, starting and ending with a letter or digit)"
            )
        if _ and not user:
            raise TenantError(f"--tenant {text!r}: the user after '=' is empty")
        return cls(namespace, user or namespace)


def tenant_rules() -> list[PolicyRule]:
    """What a tenant may do in their namespace: run MiniClusters and look at what they became (pods, logs, events,
    exec into the lead for `flux` commands); never the operator's Secrets or another tenant's namespace."""
    return [
        {
            "apiGroups": [API_GROUP],
            "resources": [PLURAL],
            "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
        },
        {"apiGroups": [API_GROUP], "resources": [f"{PLURAL}/status"], "verbs": ["get"]},
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["pods", "pods/log", "services"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["get", "create"]},
        {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["get", "list", "watch"]},
    ]


def tenant_objects(
    tenants: list[Tenant], operator_role: str, operator_account: str, operator_namespace: str, labels: dict[str, str]
) -> list[Manifest]:
    """The tenant ClusterRole once, then per tenant: its Namespace, the operator's RoleBinding, the tenant's."""
    objects: list[Manifest] = [
        {
            "apiVersion": RBAC_API,
            "kind": "ClusterRole",
            "metadata": {"name": TENANT_ROLE, "labels": labels},
            "rules": tenant_rules(),
        }
    ]
    for tenant in tenants:
        ns = tenant.namespace
        tenant_labels = {**labels, TENANT_LABEL: ns}
        objects += [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": tenant_labels}},
            {
                "apiVersion": RBAC_API,
                "kind": "RoleBinding",
                "metadata": {"name": operator_role, "namespace": ns, "labels": tenant_labels},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": operator_role},
                "subjects": [{"kind": "ServiceAccount", "name": operator_account, "namespace": operator_namespace}],
            },
            {
                "apiVersion": RBAC_API,
                "kind": "RoleBinding",
                "metadata": {"name": TENANT_ROLE, "namespace": ns, "labels": tenant_labels},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": TENANT_ROLE},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": tenant.user}],
            },
        ]
    return objects
