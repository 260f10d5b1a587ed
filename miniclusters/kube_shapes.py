"""The Kubernetes objects we write ourselves (the operator's install, tenants and metrics API, the local cluster's
add-ons), as TypedDicts: the envelope and RBAC to the field, each kind's spec as Kubernetes documents it.

Objects read back from the API server stay the backend's (backends/kubernetes/api.py); these are what we build.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict


class ObjectMeta(TypedDict, total=False):
    name: str
    namespace: str
    labels: dict[str, str]
    annotations: dict[str, str]


class PolicyRule(TypedDict):
    apiGroups: list[str]
    resources: list[str]
    verbs: list[str]
    resourceNames: NotRequired[list[str]]


class RoleRef(TypedDict):
    apiGroup: str
    kind: str
    name: str


class Subject(TypedDict):
    kind: str
    name: str
    namespace: NotRequired[str]
    apiGroup: NotRequired[str]


class Manifest(TypedDict, total=False):
    """One object to apply: apiVersion, kind, metadata, and the fields of its kind."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    rules: list[PolicyRule]
    roleRef: RoleRef
    subjects: list[Subject]
    type: str
    data: dict[str, str]
    spec: dict[str, Any]  # open: each kind's spec (Deployment, Service, APIService, CRD) as Kubernetes documents it


class Volume(TypedDict, total=False):
    """A pod's volume: its name and one source."""

    name: str
    emptyDir: dict[str, str]
    hostPath: dict[str, str]
    persistentVolumeClaim: dict[str, str]
    secret: dict[str, str]


class VolumeMount(TypedDict):
    name: str
    mountPath: str
    readOnly: NotRequired[bool]


class ContainerPort(TypedDict):
    name: str
    containerPort: int
    protocol: str


class PodSecurityContext(TypedDict):
    runAsNonRoot: bool
    seccompProfile: dict[str, str]


class ContainerSecurityContext(TypedDict):
    allowPrivilegeEscalation: bool
    readOnlyRootFilesystem: bool
    runAsUser: int
    capabilities: dict[str, list[str]]
