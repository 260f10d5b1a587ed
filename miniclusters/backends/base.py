"""The one interface every backend offers (kubernetes, local, podman), so controllers are written once.

Plain frozen dataclasses cross the boundary: no Kubernetes objects, no broker handles. Errors are
BackendError subclasses carrying the exit code the CLI should use, so bad input never becomes a traceback.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol, runtime_checkable

# ResizeOutcome is the ports' enum (one vocabulary for resize outcomes); backend errors are actuator errors.
from elasticity.control.ports import ActuatorError, ClusterView, PodResize, Rejected, ScaleResult
from elasticity.control.ports import ResizeOutcome as ResizeOutcome
from miniclusters.api.quantity import cpu_millicores, format_millicores
from miniclusters.api.spec import MiniCluster
from miniclusters.errors import MiniclustersError
from miniclusters.render.options import RenderOptions

EXIT_FAILURE = 1
EXIT_INVALID = 2


class BackendError(MiniclustersError, ActuatorError):
    """Something the user can act on; `str(error)` is the whole message."""

    exit_code = EXIT_FAILURE


class InvalidRequestError(BackendError, Rejected):
    """The request itself is wrong (size out of range, no such pod index, bad quantity); nothing was changed."""

    exit_code = EXIT_INVALID


class NotFoundError(BackendError):
    """The MiniCluster (or its pod) does not exist."""


class UnreachableError(BackendError):
    """The backend cannot be reached (no kubeconfig, API server down)."""


class ForbiddenError(BackendError):
    """The backend refused the request (RBAC)."""


class MissingAPIError(BackendError):
    """A required API is not installed (our CRD)."""


class BackendTimeoutError(BackendError):
    """Waiting gave up; the cluster may still come up."""


class FinishedError(BackendError):
    """`up` of a MiniCluster that exists and has finished: nothing is started (remove it to run it again)."""


class StartRefusedError(BackendError):
    """A pod's broker refused its input for good (the archive of `up --restore`): the cluster can never come up."""

    exit_code = EXIT_INVALID


# KEP-1287's pod conditions, which both backends report (the local backend in the kubelet's words too).
RESIZE_PENDING = "PodResizePending"
EXEC_TIMEOUT = 3600.0  # `minicluster exec`: a person's command may run long
QUERY_TIMEOUT = 20.0  # a look at the lead (status, reports): a person is waiting for the answer
RESIZE_IN_PROGRESS = "PodResizeInProgress"


@dataclass(frozen=True)
class PodCondition:
    type: str
    status: str
    reason: str = ""
    message: str = ""


@dataclass(frozen=True)
class PodStatus:
    index: int
    name: str
    phase: str
    """Pending, Running, Succeeded, Failed, Unknown (Kubernetes pod phases; the local backend uses the same words)."""
    ready: bool = False
    cpu_desired: str | None = None
    """The CPU request in the pod spec (what was asked for)."""
    cpu_allocated: str | None = None
    cpu_actual: str | None = None
    """The CPU request the container runs with now (after the kubelet applied any resize)."""
    node: str | None = None
    exit_code: int | None = None
    conditions: tuple[PodCondition, ...] = ()
    restarts: int = 0
    """Times the pod's container was restarted (kubectl's RESTARTS)."""
    reason: str | None = None
    """Why the container is not simply running or done: CrashLoopBackOff, BackoffLimitExceeded, Error, ..."""
    refused: str | None = None
    """Set when the pod's broker refused to start on its input (broker/refused.py), to its reason: no restart
    and no wait can help."""

    def condition(self, kind: str) -> PodCondition | None:
        return next((c for c in self.conditions if c.type == kind), None)


@dataclass(frozen=True)
class ClusterCondition:
    type: str
    status: str
    reason: str = ""
    message: str = ""


@dataclass(frozen=True)
class ClusterStatus:
    name: str
    namespace: str
    size: int
    """Pods wanted now (spec.size)."""
    max_size: int
    min_size: int
    pods: tuple[PodStatus, ...] = ()
    ranks_up: tuple[int, ...] | None = None
    """Broker ranks the lead reports as joined; None when the lead could not be asked."""
    ranks_down: tuple[int, ...] | None = None
    conditions: tuple[ClusterCondition, ...] = ()
    finished: bool = False
    succeeded: bool | None = None
    lead_error: str | None = None
    """Why the lead could not be asked about ranks (None when it answered)."""
    rest_url: str | None = None
    """Where the lead broker's REST API answers (spec.restful.enabled), as a client would reach it."""
    deleting: bool = False
    """Its teardown has begun (and, if this is seen, was cut short): it is going, whatever its pods say."""

    @property
    def running_pods(self) -> int:
        return sum(1 for p in self.pods if p.phase == "Running")

    @property
    def ready_pods(self) -> int:
        return sum(1 for p in self.pods if p.ready)

    def pod(self, index: int) -> PodStatus | None:
        return next((p for p in self.pods if p.index == index), None)


@dataclass(frozen=True)
class ClusterSummary:
    name: str
    namespace: str
    size: int
    ready: int
    state: str


@dataclass(frozen=True)
class ResizeResult:
    index: int
    pod: str
    outcome: ResizeOutcome
    message: str
    cpu_requested: str
    cpu_actual: str | None = None

    @property
    def ok(self) -> bool:
        return self.outcome not in (ResizeOutcome.DEFERRED, ResizeOutcome.INFEASIBLE)

    @classmethod
    def answered(cls, index: int, pod: str, answer: PodResize, cpu: str) -> ResizeResult:
        """The CLI's view of one pod's answer to a resize asked as ``cpu`` (a quantity string)."""
        actual = format_millicores(answer.cpu_actual) if answer.cpu_actual is not None else None
        return cls(index, pod, answer.outcome, answer.reason, cpu, actual)


def requested_millicores(cpu: str) -> int:
    """The ``--cpu`` quantity a resize asks, in millicores; a bad one is an InvalidRequestError naming the flag."""
    try:
        return cpu_millicores(cpu)
    except ValueError as exc:
        raise InvalidRequestError(f"--cpu: {exc}") from None


def no_such_pod(name: str, index: int, present: Iterable[int], size: int) -> InvalidRequestError:
    """The error for a pod index the cluster does not have, naming those it has."""
    have = ", ".join(map(str, sorted(present))) or "none"
    return InvalidRequestError(
        f"MiniCluster {name!r} has no pod with index {index} (pod indexes present: {have}; size is {size})"
    )


class ExecResult(NamedTuple):
    rc: int
    stdout: str
    stderr: str


@dataclass(frozen=True)
class RestEndpoint:
    url: str | None
    """A URL this machine can reach directly, or None when only `hint` says how."""
    hint: str


@dataclass(frozen=True)
class CreateOptions:
    render: RenderOptions = field(default_factory=RenderOptions)
    wait: bool = True
    timeout: float = 600.0
    """Seconds to wait for the pods to run and the brokers to join."""


@runtime_checkable
class Backend(Protocol):
    """create, status, scale, resize, exec, logs, delete, list: the whole surface controllers may use."""

    name: str
    ephemeral: bool
    """True when the cluster lives in this machine's processes (local): `up` then tears it down on Ctrl-C and,
    unless --keep, once the lead finishes; False when it lives in a cluster that outlives the CLI (kubernetes)."""

    def rest_endpoint(self, mc: MiniCluster, status: ClusterStatus) -> RestEndpoint:
        """Where the lead broker's REST API answers (spec.restful), as this backend exposes it."""
        ...

    def create(self, mc: MiniCluster, options: CreateOptions | None = None) -> ClusterStatus: ...

    def exists(self, mc: MiniCluster) -> bool:
        """Whether a MiniCluster of this name is already where `create(mc)` would put it."""
        ...

    def status(self, name: str) -> ClusterStatus: ...

    def scale(self, name: str, size: int) -> ClusterStatus: ...

    def resize(self, name: str, index: int, cpu: str) -> ResizeResult: ...

    # The control ports (elasticity/control/ports.py; miniclusters/backends/ports.py adapts them).
    def observe(self, name: str) -> ClusterView: ...

    def scale_to(self, name: str, size: int) -> ScaleResult: ...

    def resize_many(self, name: str, requests: Mapping[int, int]) -> dict[int, PodResize]: ...

    def exec(self, name: str, index: int, argv: list[str], timeout: float = EXEC_TIMEOUT) -> ExecResult:
        """Run argv in the pod's application container; a run past `timeout` seconds is killed and reported as a
        BackendError (callers that answer a person pass a short one)."""
        ...

    def logs(self, name: str, index: int = 0, follow: bool = False) -> Iterator[str]: ...

    def delete(self, name: str) -> None: ...

    def list(self) -> list[ClusterSummary]: ...
