"""The shapes of the Kubernetes objects we render and read back: only the fields we emit or look at, never the
whole API. Plain dicts at run time (TypedDicts), so the rendered output is what it always was; render builds
them, the podman and Kubernetes backends read them.

Field names are the API's own (camelCase). Everything is optional to the type checker (total=False) unless the
API requires it, since the server leaves out empty fields and we leave out what a spec does not ask for.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict

# ------------------------------------------------------------------ metadata


class OwnerReference(TypedDict, total=False):
    apiVersion: str
    kind: str
    name: str
    uid: str
    controller: bool
    blockOwnerDeletion: bool


class ObjectMeta(TypedDict, total=False):
    name: str
    namespace: str
    labels: dict[str, str]
    annotations: dict[str, str]
    ownerReferences: list[OwnerReference]
    resourceVersion: str
    uid: str
    generation: int
    creationTimestamp: str
    deletionTimestamp: str


class LabelSelector(TypedDict):
    matchLabels: dict[str, str]


# ------------------------------------------------------------------ containers


class SecretKeySelector(TypedDict, total=False):
    name: str
    key: str
    optional: bool


class EnvVarSource(TypedDict):
    secretKeyRef: SecretKeySelector


class EnvVar(TypedDict, total=False):
    name: str
    value: str
    valueFrom: EnvVarSource


class VolumeMount(TypedDict, total=False):
    name: str
    mountPath: str
    readOnly: bool


class ContainerPort(TypedDict, total=False):
    name: str
    containerPort: int
    protocol: str


class ResourceRequirements(TypedDict, total=False):
    requests: dict[str, str]
    limits: dict[str, str]
    claims: list[dict[str, Any]]  # open: the spec's own resource claims, passed through


class ExecAction(TypedDict):
    command: list[str]


class LifecycleHandler(TypedDict):
    exec: ExecAction


class Lifecycle(TypedDict, total=False):
    postStart: LifecycleHandler
    preStop: LifecycleHandler


class ResizePolicy(TypedDict):
    resourceName: str
    restartPolicy: str


class PodContainer(TypedDict, total=False):
    """A container or init container of a pod template."""

    name: str
    image: str
    imagePullPolicy: str
    workingDir: str
    command: list[str]
    args: list[str]
    env: list[EnvVar]
    ports: list[ContainerPort]
    resources: ResourceRequirements
    lifecycle: Lifecycle
    securityContext: dict[str, Any]  # open: the spec's corev1.SecurityContext, passed through
    resizePolicy: list[ResizePolicy]
    terminationMessagePolicy: str
    stdin: bool
    tty: bool
    volumeMounts: list[VolumeMount]


# ------------------------------------------------------------------ volumes


class KeyToPath(TypedDict, total=False):
    key: str
    path: str
    mode: int


class ConfigMapVolumeSource(TypedDict, total=False):
    name: str
    items: list[KeyToPath]


class SecretVolumeSource(TypedDict, total=False):
    secretName: str
    defaultMode: int
    items: list[KeyToPath]


class ClaimVolumeSource(TypedDict, total=False):
    claimName: str
    readOnly: bool


class HostPathVolumeSource(TypedDict):
    path: str


class CSIVolumeSource(TypedDict, total=False):
    driver: str
    readOnly: bool
    volumeAttributes: dict[str, str]


class EmptyDirVolumeSource(TypedDict, total=False):
    medium: str
    sizeLimit: str


class PodVolume(TypedDict, total=False):
    """A pod's volume: its name and exactly one source."""

    name: str
    configMap: ConfigMapVolumeSource
    secret: SecretVolumeSource
    persistentVolumeClaim: ClaimVolumeSource
    hostPath: HostPathVolumeSource
    csi: CSIVolumeSource
    emptyDir: EmptyDirVolumeSource


# ------------------------------------------------------------------ scheduling


class PodAffinityTerm(TypedDict):
    labelSelector: LabelSelector
    topologyKey: str


class WeightedPodAffinityTerm(TypedDict):
    weight: int
    podAffinityTerm: PodAffinityTerm


class PodAffinity(TypedDict, total=False):
    requiredDuringSchedulingIgnoredDuringExecution: list[PodAffinityTerm]
    preferredDuringSchedulingIgnoredDuringExecution: list[WeightedPodAffinityTerm]


class NodeSelectorRequirement(TypedDict):
    key: str
    operator: str
    values: list[str]


class NodeSelectorTerm(TypedDict):
    matchExpressions: list[NodeSelectorRequirement]


class NodeSelector(TypedDict):
    nodeSelectorTerms: list[NodeSelectorTerm]


class NodeAffinity(TypedDict):
    requiredDuringSchedulingIgnoredDuringExecution: NodeSelector


class Affinity(TypedDict, total=False):
    podAffinity: PodAffinity
    podAntiAffinity: PodAffinity
    nodeAffinity: NodeAffinity


class TopologySpreadConstraint(TypedDict):
    maxSkew: int
    minDomains: int
    topologyKey: str
    whenUnsatisfiable: str
    labelSelector: LabelSelector


class TaskGroupRules(TypedDict, total=False):
    """The pod-spec fields a shaped spec's task groups set (placement.task_group_rules)."""

    affinity: Affinity
    topologySpreadConstraints: list[TopologySpreadConstraint]


class Toleration(TypedDict, total=False):
    key: str
    operator: str
    value: str
    effect: str


class LocalObjectReference(TypedDict):
    name: str


class HostAlias(TypedDict):
    ip: str
    hostnames: list[str]


# ------------------------------------------------------------------ pods and the Job


class PodSpec(TypedDict, total=False):
    subdomain: str
    hostname: str
    restartPolicy: str
    initContainers: list[PodContainer]
    containers: list[PodContainer]
    volumes: list[PodVolume]
    affinity: Affinity
    topologySpreadConstraints: list[TopologySpreadConstraint]
    serviceAccountName: str
    runtimeClassName: str
    schedulerName: str
    nodeSelector: dict[str, str]
    nodeName: str
    dnsPolicy: str
    securityContext: dict[str, Any]  # open: the spec's corev1.PodSecurityContext, passed through
    imagePullSecrets: list[LocalObjectReference]
    resourceClaims: list[dict[str, Any]]  # open: the spec's own pod resource claims, passed through
    overhead: dict[str, str]
    tolerations: list[Toleration]
    automountServiceAccountToken: bool
    hostIPC: bool
    hostPID: bool
    shareProcessNamespace: bool
    hostAliases: list[HostAlias]


class PodTemplate(TypedDict, total=False):
    metadata: ObjectMeta
    spec: PodSpec


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


class Condition(TypedDict, total=False):
    """A condition of a Job, a pod or our MiniCluster (type, status True/False/Unknown, why)."""

    type: str
    status: str
    reason: str
    message: str
    lastTransitionTime: str


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


class ContainerStateDetail(TypedDict, total=False):
    """One of a container's states (running, waiting, terminated): why, and how it ended."""

    reason: str
    message: str
    exitCode: int
    startedAt: str
    finishedAt: str


class ContainerState(TypedDict, total=False):
    running: ContainerStateDetail
    waiting: ContainerStateDetail
    terminated: ContainerStateDetail


class ContainerStatus(TypedDict, total=False):
    name: str
    ready: bool
    started: bool
    restartCount: int
    state: ContainerState
    lastState: ContainerState
    allocatedResources: dict[str, str]
    resources: ResourceRequirements


class PodObjectStatus(TypedDict, total=False):
    phase: str
    conditions: list[Condition]
    containerStatuses: list[ContainerStatus]
    initContainerStatuses: list[ContainerStatus]
    qosClass: str
    reason: str
    message: str


class Pod(TypedDict, total=False):
    """A pod: the one the Job controller makes of the template (podman plays it), or one read from the API."""

    apiVersion: str
    kind: Literal["Pod"]
    metadata: ObjectMeta
    spec: PodSpec
    status: PodObjectStatus


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
