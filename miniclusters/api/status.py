"""The MiniCluster's status: what the operator observed and what its campaign and multiplexing runs must keep
across a restart of the operator (split from spec.py; the CRD's status schema is made from these)."""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel


class Condition(BaseModel):
    """A metav1.Condition."""

    model_config = ConfigDict(extra="allow", populate_by_name=True, alias_generator=to_camel)

    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str = ""
    message: str = ""
    last_transition_time: str = ""
    observed_generation: int = 0


class CampaignStatus(BaseModel):
    """What the operator's campaign has done that must outlive the operator: an operator that takes over goes on
    from here instead of starting the campaign again."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, alias_generator=to_camel)

    spec: str
    """A digest of the spec.campaign this record belongs to."""
    jobs: dict[str, str] = Field(default_factory=dict)
    """Ensemble -> the Flux job running it on the lead (its latest, when it was rerun)."""
    reruns: dict[str, int] = Field(default_factory=dict)
    cancelled: list[str] = Field(default_factory=list)
    started: float = 0.0
    """When the campaign began (seconds since the epoch)."""
    outcome: Literal["done", "cancelled"] | None = None


class MultiplexingStatus(BaseModel):
    """What the operator's multiplexing run has done that must outlive the operator: the operator that takes
    over goes on with this run instead of starting another."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, alias_generator=to_camel)

    spec: str
    """A digest of the spec.multiplexing this record belongs to."""
    run: str
    """The run's directory in the pods (its simulations' traces and progress)."""
    jobs: dict[str, str] = Field(default_factory=dict)
    """Simulation -> its Flux job on the lead."""
    attempts: dict[str, int] = Field(default_factory=dict)
    started: float = 0.0
    outcome: Literal["done", "cancelled"] | None = None


class MiniClusterStatus(BaseModel):
    """Observed state: the operator's fields (size/selector back the scale subresource) plus ours."""

    model_config = ConfigDict(extra="allow", populate_by_name=True, alias_generator=to_camel)

    size: int = 0
    selector: str = ""
    jobid: str = ""
    maximum_size: int = 0
    conditions: list[Condition] = Field(default_factory=list)
    observed_generation: int = 0
    ready_pods: int = 0
    campaign: CampaignStatus | None = None
    multiplexing: MultiplexingStatus | None = None
    phase: str = ""
    """Pending, Scaling, Running, NotReady, Completed, Failed or Invalid (the operator's summary of its
    conditions: the Phase column of `kubectl get miniclusters`)."""


# The same status as JSON, as the operator reads and writes it through the API (camelCase keys).
class ConditionJson(TypedDict):
    """A metav1.Condition."""

    type: str
    status: str
    reason: str
    message: str
    lastTransitionTime: str
    observedGeneration: int


class CampaignStatusJson(TypedDict):
    """``status.campaign`` (CampaignStatus)."""

    spec: str
    jobs: dict[str, str]
    reruns: dict[str, int]
    cancelled: list[str]
    started: float
    outcome: NotRequired[Literal["done", "cancelled"]]


class MultiplexingStatusJson(TypedDict):
    """``status.multiplexing`` (MultiplexingStatus)."""

    spec: str
    run: str
    jobs: dict[str, str]
    attempts: dict[str, int]
    started: float
    outcome: NotRequired[Literal["done", "cancelled"]]


class StatusJson(TypedDict, total=False):
    """``status`` (MiniClusterStatus)."""

    size: int
    selector: str
    jobid: str
    maximumSize: int
    conditions: list[ConditionJson]
    observedGeneration: int
    readyPods: int
    campaign: CampaignStatusJson
    multiplexing: MultiplexingStatusJson
    phase: str
