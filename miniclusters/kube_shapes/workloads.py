"""The workloads render emits and the backends read back: the Job (its spec and status) and the small objects
(Service, ConfigMap, Secret) beside it.
"""

from __future__ import annotations

from typing import Literal, TypedDict

from miniclusters.kube_shapes.meta import Condition, KubeObject, LabelSelector, ObjectMeta
from miniclusters.kube_shapes.pods import Pod, PodTemplate

# ------------------------------------------------------------------ the Job


class SuccessPolicyRule(TypedDict):
    succeededIndexes: str


class SuccessPolicy(TypedDict):
    rules: list[SuccessPolicyRule]


class JobSpec(TypedDict, total=False):
    completionMode: str
    completions: int
    parallelism: int
    backoffLimit: int
    activeDeadlineSeconds: int
    successPolicy: SuccessPolicy
    template: PodTemplate
    selector: LabelSelector


class JobStatus(TypedDict, total=False):
    conditions: list[Condition]
    active: int
    ready: int
    succeeded: int
    failed: int
    completedIndexes: str
    failedIndexes: str


class Job(TypedDict, total=False):
    apiVersion: str
    kind: Literal["Job"]
    metadata: ObjectMeta
    spec: JobSpec
    status: JobStatus


class ScaleSpec(TypedDict, total=False):
    parallelism: int | None  # null (the default, 1) when a Job without completions had its parallelism changed
    completions: int


class JobScalePatch(TypedDict):
    """A merge patch of the Job's size, guarded by its resourceVersion (backends/kubernetes/jobs.py)."""

    metadata: ObjectMeta
    spec: ScaleSpec


# ------------------------------------------------------------------ the small objects


class ServicePort(TypedDict, total=False):
    name: str
    port: int
    targetPort: int
    nodePort: int
    protocol: str


class ServiceSpec(TypedDict, total=False):
    type: str
    clusterIP: str
    publishNotReadyAddresses: bool
    selector: dict[str, str]
    ports: list[ServicePort]


class Service(TypedDict, total=False):
    apiVersion: str
    kind: Literal["Service"]
    metadata: ObjectMeta
    spec: ServiceSpec


class ConfigMap(TypedDict, total=False):
    apiVersion: str
    kind: Literal["ConfigMap"]
    metadata: ObjectMeta
    data: dict[str, str]


class Secret(TypedDict, total=False):
    apiVersion: str
    kind: Literal["Secret"]
    metadata: ObjectMeta
    type: str
    data: dict[str, str]


RenderedObject = Secret | ConfigMap | Service | Job
"""One object `minicluster render` emits."""

AnyObject = KubeObject | Job | Pod | Service | ConfigMap | Secret
"""An object, generic or typed by its kind: what reads only its apiVersion, kind and metadata takes."""
