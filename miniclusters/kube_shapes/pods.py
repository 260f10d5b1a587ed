"""A pod's shapes: its containers, volumes, scheduling, its spec and template (what render writes into a Job
and podman plays), and its status as the kubelet reports it. Only the fields we emit or look at.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

from miniclusters.kube_shapes.meta import Condition, LabelSelector, ObjectMeta

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


class PodSecurityContext(TypedDict, total=False):
    """The fields the operator's own Deployment sets (a spec's securityContext passes through as the user wrote
    it)."""

    runAsNonRoot: bool
    seccompProfile: dict[str, str]


class ContainerSecurityContext(TypedDict, total=False):
    allowPrivilegeEscalation: bool
    readOnlyRootFilesystem: bool
    runAsUser: int
    capabilities: dict[str, list[str]]


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
    type: NotRequired[str]


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


# ------------------------------------------------------------------ the pod


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
    containerID: str
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
