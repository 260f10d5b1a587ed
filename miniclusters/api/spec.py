"""The MiniCluster spec: every field of the Flux Operator's `flux-framework.org/v1alpha2` MiniCluster.

Field names, defaults and meanings follow the operator's Go types (api/v1alpha2/minicluster_types.go), so
its YAML files load unchanged. Our additions live in clearly marked fields (`spec.flux.flavour`) and in
optional sections that default to "off", so files written today keep loading when sections are added.
Cross-field rules live in `rules.py`, which imports this module (never the reverse); `load.py` runs them.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from miniclusters.api.campaign import CampaignSpec
from miniclusters.api.extension_specs import AutoscaleSpec, MultiplexingSpec, PlacementSpec, ProfilingSpec, RestfulSpec
from miniclusters.api.limits import (
    ARG_MAX,
    CONTAINERS_MAX,
    DNS_LABEL_MAX,
    LIST_MAX,
    NAME_MAX,
    PATH_MAX,
    QUANTITY_MAX,
    SETTING_MAX,
    VOLUMES_MAX,
)
from miniclusters.api.malleable import MalleableRunSpec
from miniclusters.api.quantity import Quantity
from miniclusters.api.spec_base import SpecModel
from miniclusters.api.status import MiniClusterStatus

API_GROUP = "miniclusters.dev"
API_VERSION = "v1alpha1"
FLUX_OPERATOR_API_VERSION: Final = "flux-framework.org/v1alpha2"
OUR_API_VERSION: Final = "miniclusters.dev/v1alpha1"
KIND: Final = "MiniCluster"
ApiVersion = Literal["flux-framework.org/v1alpha2", "miniclusters.dev/v1alpha1"]

DEFAULT_APP_IMAGE = "ghcr.io/rse-ops/accounting:app-latest"
DEFAULT_FLUX_VIEW_IMAGE = "ghcr.io/converged-computing/flux-view-rocky:tag-9"
DEFAULT_DEADLINE_SECONDS = 31500000
DEFAULT_BACKOFF_LIMIT = 100
DEFAULT_BROKER_PORT = 8050

Flavour = Literal["builtin", "flux"]

Port = Annotated[int, Field(ge=1, le=65535)]


class Network(SpecModel):
    headless_name: str = Field(default="", max_length=DNS_LABEL_MAX)
    """Headless Service name and pod subdomain; empty means metadata.name."""
    disable_affinity: bool = False


class LoggingSpec(SpecModel):
    quiet: bool = False
    strict: bool = False
    debug: bool = False
    zeromq: bool = False
    timed: bool = False


class Archive(SpecModel):
    path: str = Field(default="", max_length=PATH_MAX)
    """The queue archive in the lead's filesystem: restored at start when it exists (`minicluster save` writes
    it, `minicluster up --restore` sets it)."""
    claim_name: str = Field(default="", max_length=DNS_LABEL_MAX)
    """Ours: a PersistentVolumeClaim mounted at the archive's directory in the broker container, so a new
    MiniCluster reads what the old one wrote."""
    unfit: Literal["wait", "reject"] = "wait"
    """Ours: a restored job that can never fit this cluster waits (its reason shown) or is rejected with it."""


class Toleration(SpecModel):
    key: str = ""
    effect: Literal["", "NoSchedule", "PreferNoSchedule", "NoExecute"] = ""
    operator: Literal["", "Exists", "Equal"] = ""
    value: str = Field(default="", max_length=DNS_LABEL_MAX)
    """A label value: at most 63 characters."""


class PodSpec(SpecModel):
    annotations: dict[str, str] = Field(default_factory=dict)
    labels: dict[str, str] = Field(default_factory=dict)
    restart_policy: Literal["", "OnFailure", "Never"] = ""
    service_account_name: str = ""
    runtime_class_name: str = ""
    automount_service_account_token: bool = False
    scheduler_name: str = ""
    node_selector: dict[str, str] = Field(default_factory=dict)
    node_affinity: dict[str, list[str]] = Field(default_factory=dict)
    tolerations: list[Toleration] = Field(default_factory=list, max_length=LIST_MAX)
    dns_policy: Literal["", "ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"] = Field(
        default="", alias="dnsPolicy"
    )
    host_ipc: bool = Field(default=False, alias="hostIPC")
    host_pid: bool = Field(default=False, alias="hostPID")
    resources: dict[str, Quantity] = Field(default_factory=dict)
    """A ResourceList; the operator renders it as the pod's overhead."""
    # open: a corev1.SecurityContext, passed through to the container
    security_context: dict[str, Any] = Field(default_factory=dict)
    """A corev1.PodSecurityContext, passed through (checked against the Kubernetes schema on render)."""


class ResourceRequirements(SpecModel):
    limits: dict[str, Quantity] = Field(default_factory=dict)
    requests: dict[str, Quantity] = Field(default_factory=dict)
    # open: corev1 PodResourceClaims, passed through to the pods
    claims: list[dict[str, Any]] = Field(default_factory=list)


class ContainerVolume(SpecModel):
    path: str = Field(default="", max_length=PATH_MAX)
    host_path: str = Field(default="", max_length=PATH_MAX)
    config_map_name: str = Field(default="", max_length=NAME_MAX)
    items: dict[str, str] = Field(default_factory=dict)
    claim_name: str = Field(default="", max_length=NAME_MAX)
    secret_name: str = Field(default="", max_length=NAME_MAX)
    read_only: bool = False
    empty_dir_medium: str = ""
    empty_dir_size_limit: str = Field(default="", max_length=QUANTITY_MAX)
    csi_driver: str = Field(default="", alias="csiDriver")
    csi_driver_attributes: dict[str, str] = Field(default_factory=dict, alias="csiDriverAttributes")
    empty_dir: bool = False


class SecretRef(SpecModel):
    name: str
    key: str


class LifeCycle(SpecModel):
    post_start_exec: str = ""
    pre_stop_exec: str = ""


class Commands(SpecModel):
    prefix: str = ""
    script: str = ""
    init: str = ""
    pre: str = ""
    post: str = ""
    worker_pre: str = ""
    broker_pre: str = ""
    service_pre: str = ""


class Container(SpecModel):
    image_pull_secret: str = ""
    image: str = DEFAULT_APP_IMAGE
    working_dir: str = ""
    name: str = Field(default="", max_length=DNS_LABEL_MAX)
    command: str = Field(default="", max_length=ARG_MAX)
    pull_always: bool = False
    image_pull_policy: Literal["", "Always", "IfNotPresent", "Never"] = ""
    ports: list[Port] = Field(default_factory=list)
    environment: dict[str, str] = Field(default_factory=dict)
    secrets: dict[str, SecretRef] = Field(default_factory=dict)
    launcher: bool = False
    batch: bool = False
    batch_raw: bool = False
    logs: str = ""
    run_flux: bool = False
    no_wrap_entrypoint: bool = False
    volumes: dict[str, ContainerVolume] = Field(default_factory=dict, max_length=VOLUMES_MAX)
    life_cycle: LifeCycle = Field(default_factory=LifeCycle)
    resources: ResourceRequirements = Field(default_factory=ResourceRequirements)
    commands: Commands = Field(default_factory=Commands)
    # open: a corev1.SecurityContext, passed through to the container
    security_context: dict[str, Any] = Field(default_factory=dict)
    """A corev1.SecurityContext, passed through; the older `addCapabilities` list is also understood."""


class FluxContainer(SpecModel):
    disable: bool = False
    name: str = "flux-view"
    working_dir: str = ""
    python_path: str = ""
    resources: ResourceRequirements = Field(default_factory=ResourceRequirements)
    image_pull_secret: str = ""
    image: str = DEFAULT_FLUX_VIEW_IMAGE
    pull_always: bool = False
    # open: a corev1.SecurityContext, passed through to the container
    security_context: dict[str, Any] = Field(default_factory=dict)
    mount_path: str = "/mnt/flux"


class FluxScheduler(SpecModel):
    simple: bool = False
    queue_policy: Literal["", "fcfs", "easy", "hybrid", "conservative"] = ""
    """Empty means fcfs, as in the operator."""


class FluxBroker(SpecModel):
    address: str
    name: str
    size: int = Field(ge=1)
    port: int = Field(default=DEFAULT_BROKER_PORT, ge=1, le=65535)


class BurstedCluster(SpecModel):
    """The Flux Operator's bursted cluster: its hosts `<name>-0..size-1` join the hostlist after the pods."""

    name: str = Field(default="", max_length=DNS_LABEL_MAX)
    """Empty means `burst-<index>`, as in the operator."""
    size: int = Field(default=0, ge=0)
    """0 means spec.size, as in the operator."""


class BurstPluginLimit(SpecModel):
    """A miniclusters extension: one burst plugin the lead's burst service may use, and its most nodes."""

    name: str
    """An installed plugin (entry point group `miniclusters.burst_plugins`), e.g. `local` or `kubernetes`."""
    size: int = Field(default=0, ge=0)
    """The most nodes one burst of it may bring; 0 means no limit of its own."""


class Bursting(SpecModel):
    lead_broker: FluxBroker | None = None
    hostlist: str = ""
    clusters: list[BurstedCluster] = Field(default_factory=list, max_length=LIST_MAX)
    # ---- miniclusters extensions -------------------------------------------------------------
    plugins: list[BurstPluginLimit] = Field(default_factory=list)
    """The burst service's plugins (builtin flavour): present, the lead runs the service beside its broker."""


class FluxSpec(SpecModel):
    container: FluxContainer = Field(default_factory=FluxContainer)
    arch: str = ""
    submit_command: str = ""
    wrap: str = ""
    connect_timeout: str = Field(default="5s", max_length=SETTING_MAX)
    option_flags: str = ""
    minimal_service: bool = False
    disable_socket: bool = False
    topology: str = Field(default="", max_length=SETTING_MAX)
    no_wait_socket: bool = False
    complete_workers: bool = False
    log_level: int = Field(default=6, ge=0, le=7)
    curve_cert: str = ""
    scheduler: FluxScheduler = Field(default_factory=FluxScheduler)
    munge_secret: str = ""
    bursting: Bursting = Field(default_factory=Bursting)
    broker_config: str = ""
    environment: dict[str, str] = Field(default_factory=dict)
    # ---- miniclusters extensions -------------------------------------------------------------
    flavour: Flavour = "builtin"
    """Which broker runs in the pods: our pure-Python `builtin` broker, or real flux-core (`flux`)."""


class MiniClusterSpec(SpecModel):
    containers: list[Container] = Field(min_length=1, max_length=CONTAINERS_MAX)
    # open: resourcev1 ResourceClaims, passed through
    resource_claims: list[dict[str, Any]] = Field(default_factory=list)
    services: list[Container] = Field(default_factory=list, max_length=CONTAINERS_MAX)
    network: Network = Field(default_factory=Network)
    job_labels: dict[str, str] = Field(default_factory=dict)
    interactive: bool = False
    flux: FluxSpec = Field(default_factory=FluxSpec)
    logging: LoggingSpec = Field(default_factory=LoggingSpec)
    archive: Archive = Field(default_factory=Archive)
    share_process_namespace: bool = False
    cleanup: bool = False
    size: int = Field(default=1, ge=1)
    max_size: int = Field(default=0, ge=0)
    """0 means "equal to size", as in the operator."""
    backoff_limit: int = Field(default=DEFAULT_BACKOFF_LIMIT, ge=0)
    min_size: int = Field(default=0, ge=0)
    """0 means unset: the quorum is every rank."""
    tasks: int = Field(default=1, ge=1)
    deadline_seconds: int = Field(default=DEFAULT_DEADLINE_SECONDS, ge=1)
    pod: PodSpec = Field(default_factory=PodSpec)
    # ---- miniclusters extensions -------------------------------------------------------------
    restful: RestfulSpec = Field(default_factory=RestfulSpec)
    profiling: ProfilingSpec = Field(default_factory=ProfilingSpec)
    multiplexing: MultiplexingSpec = Field(default_factory=MultiplexingSpec)
    autoscale: AutoscaleSpec = Field(default_factory=AutoscaleSpec)
    campaign: CampaignSpec | None = None
    """Ensembles of OpenFOAM cases, each a Flux sub-instance (`minicluster up` runs the campaign; docs/campaign.md)."""
    malleable: MalleableRunSpec | None = None
    """A trace run live as malleable jobs in this MiniCluster (`minicluster up` runs it; docs/malleable.md)."""
    placement: PlacementSpec = Field(default_factory=PlacementSpec)

    @property
    def effective_max_size(self) -> int:
        return self.max_size or self.size

    @property
    def flux_runner_index(self) -> int:
        """Index of the container that runs the broker (a lone container runs it implicitly)."""
        if len(self.containers) == 1:
            return 0
        for index, container in enumerate(self.containers):
            if container.run_flux:
                return index
        raise ValueError("no runFlux container")

    @property
    def quorum(self) -> int:
        return self.min_size or self.size


class ObjectMeta(BaseModel):
    """The metadata we use; anything else Kubernetes put there is kept as is."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    name: str
    namespace: str = "default"
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)


class MiniCluster(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, alias_generator=to_camel)

    api_version: ApiVersion = OUR_API_VERSION
    kind: Literal["MiniCluster"] = KIND
    metadata: ObjectMeta
    spec: MiniClusterSpec
    status: MiniClusterStatus | None = None

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def namespace(self) -> str:
        return self.metadata.namespace

    @property
    def headless_name(self) -> str:
        return self.spec.network.headless_name or self.metadata.name

    # open: the object as Kubernetes stores it (the models are its types)
    def to_dict(self) -> dict[str, Any]:
        """The object as Kubernetes would store it (camelCase, defaults included, no status if none)."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")
