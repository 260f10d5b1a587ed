"""The spec's optional miniclusters sections (RESTful API, profiling, multiplexing, autoscaling, placement):
each defaults to "off", so files written before a section existed keep loading (split from spec.py)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from miniclusters.api.limits import ARG_MAX, DNS_LABEL_MAX, MPI_NAME_MAX, PATH_MAX
from miniclusters.api.spec_base import SpecModel


class RestfulSpec(SpecModel):
    """The Flux RESTful API on the lead broker (a miniclusters extension; off unless enabled)."""

    enabled: bool = False
    port: int = Field(default=5000, ge=1, le=65535)
    mode: Literal["single-user", "multi-user"] = "single-user"
    """multi-user: each user sees only their jobs, which run as their account when the broker is root."""
    require_auth: bool = True
    secret_name: str = Field(default="", max_length=DNS_LABEL_MAX)
    """A Secret whose keys FLUX_USER, FLUX_TOKEN and FLUX_SECRET_KEY configure the superuser and handshake."""


class ProfilingSpec(SpecModel):
    """PMPI duty-cycle profiling of the spec's command (a miniclusters extension; `flux submit -o pmpi`)."""

    enabled: bool = False
    iterations: int = Field(default=0, ge=0)
    """Write traces after this many iterations (0: at MPI_Finalize)."""
    directory: str = Field(default="", max_length=PATH_MAX)
    """Where each rank's trace goes (default: <working dir>/pmpi-<jobid>); use a shared volume on Kubernetes."""
    boundary: str = Field(default="", max_length=MPI_NAME_MAX)
    """The MPI call that ends an iteration (default MPI_Barrier; OpenFOAM: MPI_Allreduce)."""


class MultiplexingSpec(SpecModel):
    """CPU multiplexing of several simulations on these pods (a miniclusters extension; `minicluster multiplex`).

    The controller profiles the first simulation, resizes every pod in place to what its ranks need, packs
    more simulations while the nodes have headroom and the throughput model predicts an efficiency above the
    threshold, and keeps them progressing at similar rates.
    """

    enabled: bool = False
    command: str = Field(default="", max_length=ARG_MAX)
    """The simulation: an MPI program and its arguments, started as one Flux job per simulation."""
    max: int = Field(default=4, ge=1)
    """At most this many simulations at once."""
    total: int = Field(default=0, ge=0)
    """How many simulations to run in all (0: max); early finishers make room for the rest."""
    ranks: int = Field(default=0, ge=0)
    """MPI ranks per simulation (0: spec.tasks)."""
    profile_iterations: int = Field(default=50, ge=1)
    profile_together: int = Field(default=1, ge=1)
    """Simulations started at once and profiled side by side, splitting the rigid allocation (at most max)."""
    fairness: float = Field(default=1.10, ge=1.0)
    """Largest fastest/slowest progress ratio tolerated before CPU moves toward the slow simulation."""
    efficiency_threshold: float = Field(default=0.85, ge=0.01, le=1.0)
    """Pack another simulation only while the model predicts Theta(N)/N at or above this."""
    headroom: float = Field(default=1.2, ge=0.01)
    """A rank's request is duty x allocation x headroom."""
    boundary: str = Field(default="", max_length=MPI_NAME_MAX)
    """The MPI call that ends an iteration (default MPI_Barrier; OpenFOAM: MPI_Allreduce)."""
    workdir: str = ""
    """Where simulations write output and traces (default: a directory in the controller's state)."""


class AutoscaleSpec(SpecModel):
    """Queue-driven autoscaling between [max(1, minSize), maxSize] (a miniclusters extension; off unless enabled).

    The lead's queue decides: the cluster grows for pending jobs the scheduler would start, and after
    ``idleSeconds`` with more pods than needed it drains the highest ranks and scales down once they are idle.
    """

    enabled: bool = False
    idle_seconds: int = Field(default=60, ge=0)
    """How long the cluster must have more pods than its queue needs before it shrinks."""
    cooldown_seconds: int = Field(default=30, ge=0)
    """The least time between two scale actions."""
    policy: Literal["easy", "fcfs"] = "easy"
    """The queue policy the node need is computed with (which pending jobs would start at maxSize)."""
    interval_seconds: float = Field(default=5.0, ge=0.1)
    """How often the loop looks at the queue."""


class PlacementSpec(SpecModel):
    """Fine-grained placement of the spec's MPI job (a miniclusters extension; Liu and Guitart; docs/placement.md).

    With a policy, `size` is the number of nodes the job may use and `tasks` its ranks: the pods (workers), their
    requests and their affinity follow from the policy and the profile class instead of being one pod per node.
    """

    profile: Literal["cpu", "memory", "network"] = "cpu"
    """The job's class where no PMPI profile says otherwise: network-bound jobs stay in one worker."""
    policy: Literal["none", "scale", "granularity"] = "none"
    """none: the shape as typed; scale: one worker per node; granularity: one worker per rank."""
    cpus: Literal["shared", "exclusive"] = "shared"
    """exclusive: whole cores with limits equal to requests (Guaranteed QoS), pinned by the kubelet's static CPU
    manager on Kubernetes and by a cpuset on the local backend."""
    groups: int = Field(default=0, ge=0)
    """Task groups of the pods (one node each): 0 lets the policy choose (none: no grouping)."""
