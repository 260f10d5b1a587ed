"""Kubernetes objects as TypedDicts: the ones we write ourselves (the operator's install, tenants and metrics API,
the local cluster's add-ons) and the ones the operator reads (KubeObject): the envelope, metadata and RBAC to the
field, each kind's spec and status as Kubernetes documents them.

The backend's KubeApi speaks plain dicts; the operator turns what it reads into KubeObject where it reads it
(controller.py, watcher.py) and hands the API a plain dict (`dict(obj)`) where it writes.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict


class ObjectMeta(TypedDict, total=False):
    name: str
    namespace: str
    labels: dict[str, str]
    annotations: dict[str, str]
    # set by the API server
    uid: str
    resourceVersion: str
    generation: int
    deletionTimestamp: str


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


class KubeObject(Manifest, total=False):
    """An object as the API server returns it (a watch's ERROR carries code and message instead)."""

    status: dict[str, Any]  # open: each kind's status as Kubernetes documents it
    code: int
    message: str


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
