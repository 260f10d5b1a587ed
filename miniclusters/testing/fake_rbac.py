"""Kubernetes RBAC authorization, evaluated over Role/ClusterRole/RoleBinding/ClusterRoleBinding objects, for the
fake API server (FakeKube.authorizer): so a test proves that rendered RBAC really lets a subject do what it needs,
and nothing outside its namespaces.

The rules, from https://kubernetes.io/docs/reference/access-authn-authz/rbac/ :
- RBAC only adds permissions; a request is allowed when any rule reachable from a binding of the subject allows it.
- A RoleBinding grants the rules of a Role in its own namespace, or of a ClusterRole, but only within the
  RoleBinding's namespace. A ClusterRoleBinding grants a ClusterRole's rules in every namespace and cluster-wide.
- A request for a namespaced resource made across all namespaces (list/watch with no namespace) needs a
  ClusterRoleBinding: RoleBindings never grant it.
- A rule matches when its apiGroups, resources and verbs each contain the request's (or "*"); a subresource is
  named "resource/subresource"; resourceNames, when given, must contain the object's name (and so never match
  list, watch or create, which have none).
- A ServiceAccount subject matches "system:serviceaccount:<namespace>:<name>".
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from miniclusters.kube_shapes import KubeObject, PolicyRule

RBAC = "rbac.authorization.k8s.io/v1"


@dataclass(frozen=True)
class Subject:
    kind: str  # User, Group or ServiceAccount
    name: str
    namespace: str = ""

    @property
    def username(self) -> str:
        if self.kind == "ServiceAccount":
            return f"system:serviceaccount:{self.namespace}:{self.name}"
        return self.name


@dataclass
class RbacAuthorizer:
    """Answers "may `subject` do `verb` on this resource in this namespace?" from the RBAC objects given."""

    subject: Subject
    objects: list[KubeObject] = field(default_factory=list)

    def add(self, objects: Iterable[KubeObject]) -> None:
        self.objects.extend(o for o in objects if o.get("apiVersion") == RBAC)

    def _role(self, kind: str, name: str, namespace: str | None) -> list[PolicyRule]:
        for obj in self.objects:
            meta = obj.get("metadata", {})
            same_scope = kind == "ClusterRole" or meta.get("namespace") == namespace
            if obj.get("kind") == kind and meta.get("name") == name and same_scope:
                return list(obj.get("rules", []))
        return []  # a binding to a role that does not exist grants nothing

    def _bound(self, binding: KubeObject) -> bool:
        for subject in binding.get("subjects", []):
            if subject.get("kind") != self.subject.kind or subject.get("name") != self.subject.name:
                continue
            if self.subject.kind != "ServiceAccount" or subject.get("namespace") == self.subject.namespace:
                return True
        return False

    def rules_for(self, namespace: str | None) -> list[PolicyRule]:
        """Every rule the subject holds in `namespace` (None: cluster-wide)."""
        rules: list[PolicyRule] = []
        for binding in self.objects:
            if not self._bound(binding):
                continue
            ref = binding.get("roleRef", {})
            if binding.get("kind") == "ClusterRoleBinding" and ref.get("kind") == "ClusterRole":
                rules += self._role("ClusterRole", ref.get("name", ""), None)
            elif binding.get("kind") == "RoleBinding" and binding.get("metadata", {}).get("namespace") == namespace:
                rules += self._role(ref.get("kind", ""), ref.get("name", ""), namespace)
        return rules

    def allowed(self, verb: str, group: str, resource: str, namespace: str | None, name: str | None = None) -> bool:
        """`resource` may carry a subresource ("pods/exec"); `namespace` None is a cluster-wide request."""
        for rule in self.rules_for(namespace):
            if not _contains(rule.get("apiGroups", []), group):
                continue
            if not _contains(rule.get("resources", []), resource) or not _contains(rule.get("verbs", []), verb):
                continue
            names = rule.get("resourceNames")
            if names and (name is None or name not in names):
                continue
            return True
        return False


def _contains(values: list[str], wanted: str) -> bool:
    return "*" in values or wanted in values
