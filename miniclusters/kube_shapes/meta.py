"""The part every Kubernetes object shares (apiVersion, kind, metadata) and the generic object the API layer
speaks (KubeObject): the envelope and metadata to the field, each kind's spec and status left open in this one
definition, RBAC's and the small kinds' top-level fields typed.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict


class OwnerReference(TypedDict, total=False):
    apiVersion: str
    kind: str
    name: str
    uid: str
    controller: bool
    blockOwnerDeletion: bool


class ObjectMeta(TypedDict, total=False):
    name: str
    generateName: str
    namespace: str
    labels: dict[str, str]
    annotations: dict[str, str]
    ownerReferences: list[OwnerReference]
    finalizers: list[str]
    # set by the API server
    uid: str
    resourceVersion: str
    generation: int
    creationTimestamp: str
    deletionTimestamp: str


class LabelSelector(TypedDict):
    matchLabels: dict[str, str]


class Condition(TypedDict, total=False):
    """A condition of a Job, a pod or our MiniCluster (type, status True/False/Unknown, why)."""

    type: str
    status: str
    reason: str
    message: str
    lastTransitionTime: str


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


class KubeObject(TypedDict, total=False):
    """An object of any kind, as we send it to the API server or it returns it: the envelope and metadata, the
    top-level fields of RBAC, Secrets and ConfigMaps, and each kind's spec and status (a watch's ERROR carries a
    metav1.Status's code and message instead)."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    rules: list[PolicyRule]
    roleRef: RoleRef
    subjects: list[Subject]
    type: str
    data: dict[str, str]
    stringData: dict[str, str]
    # open: each kind's spec (Job, Pod, Service, Deployment, CRD, our MiniCluster) as Kubernetes documents it
    spec: dict[str, Any]
    status: dict[str, Any]  # open: each kind's status as Kubernetes documents it
    code: int
    message: str
    reason: str


Manifest = KubeObject
"""One object to apply: the same shape the API server returns, without what the server fills in."""
