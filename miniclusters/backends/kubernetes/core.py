"""What every part of the Kubernetes backend shares: the API handle, its namespace, errors in words, loading objects.

The backend is made of parts, each given only what it needs and composed by backend.py: this context (the API
handle, the namespace, polling), lifecycle.py (create, exists, delete), observer.py (status, the Observer port,
list) and actuate.py (scale and resize: the actuator). backend.py itself reaches into a pod (exec, logs).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TypeVar, cast

from miniclusters.api import SpecError, load_minicluster
from miniclusters.api.spec import MiniCluster
from miniclusters.backends.base import (
    BackendError,
    ForbiddenError,
    InvalidRequestError,
    MissingAPIError,
    NotFoundError,
    no_such_pod,
)
from miniclusters.backends.kubernetes.api import CRD, JOB, MINICLUSTER, POD, ApiError, Kind, KubeApi
from miniclusters.backends.kubernetes.retry import with_retries
from miniclusters.backends.kubernetes.status import live_pods, pod_status
from miniclusters.backends.reporting import Polling
from miniclusters.kube_shapes import Job, KubeObject, Pod
from miniclusters.render.layout import NAME_LABEL

CRD_SETTLE_S = 15.0
"""How long a freshly applied CRD may take to be served before `check_crd` says it is missing."""

T = TypeVar("T")
CRD_HINT = "install it with: minicluster crd | kubectl apply --server-side -f -"


MISSING_NAMESPACE = re.compile(r'namespaces "([^"]+)" not found')


def explain(error: ApiError, doing: str) -> BackendError:
    """A BackendError naming the action, the server's words, and the fix where we know it."""
    if error.status == 403:
        return ForbiddenError(f"{doing}: forbidden by RBAC: {error.message}")
    if error.status == 404:
        missing = MISSING_NAMESPACE.fullmatch(error.message)
        if missing:  # the real API server's words for a create into a namespace that does not exist
            namespace = missing[1]
            return NotFoundError(
                f"{doing}: namespace {namespace!r} does not exist: create it first "
                f"(kubectl create namespace {namespace}), or choose another with --namespace"
            )
        return NotFoundError(f"{doing}: {error.message}")
    if error.status in (400, 422):
        return InvalidRequestError(f"{doing}: rejected by the API server: {error.message}")
    if error.status == 409:
        return BackendError(f"{doing}: conflicting update, try again: {error.message}")
    return BackendError(f"{doing}: {error.status} {error.reason}: {error.message}")


def runner_container(mc: MiniCluster) -> str:
    """Name of the container that runs the broker (as the renderer names it)."""
    return mc.spec.containers[mc.spec.flux_runner_index].name or mc.name


class KubeContext:
    """The API handle, the namespace every call goes to, how to wait, and the helpers every part uses (it holds
    no cluster state: that lives in the API server)."""

    def __init__(self, api: KubeApi, namespace: str, polling: Polling, resize_wait: float) -> None:
        self.api = api
        self.namespace = namespace
        """Set by create to the namespace the cluster was created in (lifecycle.namespace_for)."""
        self.polling = polling
        self.resize_wait = resize_wait

    @property
    def clock(self) -> Callable[[], float]:
        return self.polling.clock

    @property
    def sleep(self) -> Callable[[float], None]:
        return self.polling.sleep

    def call(self, doing: str, call: Callable[[], T]) -> T:
        try:
            return with_retries(call, sleep=self.sleep)
        except ApiError as exc:
            raise explain(exc, doing) from None

    def get_optional(self, kind: Kind, name: str, namespace: str | None = None) -> KubeObject | None:
        try:
            return with_retries(lambda: self.api.get(kind, namespace or self.namespace, name), sleep=self.sleep)
        except ApiError as exc:
            if exc.not_found:
                return None
            raise explain(exc, f"reading {kind.kind} {name!r}") from None

    def job(self, name: str) -> Job | None:
        """The MiniCluster's Job, None when there is none."""
        return cast("Job | None", self.get_optional(JOB, name))  # the Job as the API server has it

    def check_crd(self) -> None:
        """MissingAPIError unless our CRD is installed (the API group/version is served). A CRD applied a moment
        ago is served only once the apiserver has established it and its discovery caught up (about a second on
        the real v1.37 server): while the CRD object exists, wait up to CRD_SETTLE_S for that."""
        deadline = self.clock() + CRD_SETTLE_S
        while True:
            try:
                self._check_served()
                return
            except MissingAPIError:
                if self.clock() >= deadline or not self._crd_object_exists():
                    raise
                self.sleep(0.5)

    def _check_served(self) -> None:
        try:
            resources = with_retries(lambda: self.api.served_resources(MINICLUSTER.api_version), sleep=self.sleep)
        except ApiError as exc:
            if exc.not_found:
                raise MissingAPIError(
                    f"the MiniCluster CRD ({MINICLUSTER.plural}.{MINICLUSTER.group}) is not installed; {CRD_HINT}"
                ) from None
            raise explain(exc, f"checking for the {MINICLUSTER.api_version} API") from None
        if MINICLUSTER.plural not in resources:
            raise MissingAPIError(f"{MINICLUSTER.api_version} does not serve {MINICLUSTER.plural}; {CRD_HINT}")

    def _crd_object_exists(self) -> bool:
        """Whether our CustomResourceDefinition is there (False when it is not, or we may not read CRDs)."""
        try:
            self.api.get(CRD, None, f"{MINICLUSTER.plural}.{MINICLUSTER.group}")
        except ApiError:
            return False
        return True

    def load(self, name: str) -> tuple[KubeObject, MiniCluster]:
        obj = self.get_optional(MINICLUSTER, name)
        if obj is None:
            raise NotFoundError(f"MiniCluster {name!r} not found in namespace {self.namespace!r}")
        data = {k: v for k, v in obj.items() if k != "status"}
        try:
            return obj, load_minicluster(data, source=f"MiniCluster {name}")
        except SpecError as exc:
            raise InvalidRequestError(str(exc)) from None

    def pods(self, name: str) -> list[Pod]:
        items, _ = self.call(
            f"listing the pods of {name!r}", lambda: self.api.list_objects(POD, self.namespace, f"{NAME_LABEL}={name}")
        )
        return live_pods(cast("list[Pod]", items))  # the pods as the API returns them

    def pod(self, mc: MiniCluster, index: int) -> Pod:
        pods = {pod_status(p).index: p for p in self.pods(mc.name)}
        if index not in pods:
            raise no_such_pod(mc.name, index, pods, mc.spec.size)
        return pods[index]
