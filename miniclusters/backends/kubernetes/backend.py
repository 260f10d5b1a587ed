"""The Kubernetes backend: client-side `up` (no operator needed), status, scale, in-place resize, exec, logs.

Every call goes through a KubeApi (the real client or the in-memory fake). API errors become BackendErrors
that say what was being done and what to do about it; transient ones (429, 5xx) are retried with back-off.
The backend composes parts (core.py lists them): this class builds them once and hands each Backend and port
method to the part that does it; reaching into a pod (exec, logs) is done here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping

from elasticity.control.ports import ClusterView, PodResize, ScaleResult
from miniclusters.api.spec import MiniCluster
from miniclusters.backends.base import (
    EXEC_TIMEOUT,
    ClusterStatus,
    ClusterSummary,
    CreateOptions,
    ExecResult,
    InvalidRequestError,
    ResizeResult,
    RestEndpoint,
)
from miniclusters.backends.kubernetes.actuate import KubernetesActuator
from miniclusters.backends.kubernetes.api import ApiError, KubeApi
from miniclusters.backends.kubernetes.core import KubeContext, explain, runner_container
from miniclusters.backends.kubernetes.lead import at_broker
from miniclusters.backends.kubernetes.lifecycle import KubernetesLifecycle
from miniclusters.backends.kubernetes.observer import KubernetesObserver
from miniclusters.backends.reporting import Polling
from miniclusters.backends.wait import ProgressCallback

BACKEND_NAME = "kubernetes"


class KubernetesBackend:
    """Backend over a Kubernetes API server (1.27+ for elastic Indexed Jobs, 1.33+ for in-place resize)."""

    name = BACKEND_NAME
    ephemeral = False

    def __init__(
        self,
        context: str | None = None,
        namespace: str | None = None,
        api: KubeApi | None = None,
        progress: ProgressCallback | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        poll_interval: float = 2.0,
        resize_wait: float = 10.0,
        latency: str | None = None,
    ) -> None:
        if latency:
            raise InvalidRequestError(f"--latency applies to the local backend only (backend is {BACKEND_NAME!r})")
        if api is None:
            from miniclusters.backends.kubernetes.client import RealKubeApi

            api = RealKubeApi.from_kubeconfig(context, namespace)
        polling = Polling(clock, sleep, poll_interval, progress)
        ctx = KubeContext(api, namespace or api.namespace, polling, resize_wait)
        self._ctx = ctx
        self._observer = KubernetesObserver(ctx)
        self._lifecycle = KubernetesLifecycle(ctx, self._observer.status)
        self._actuator = KubernetesActuator(ctx)

    @property
    def api(self) -> KubeApi:
        """The API this backend talks to (the operator and the tests reach the server through it)."""
        return self._ctx.api

    @property
    def namespace(self) -> str:
        """The namespace calls go to (create moves it to the cluster's own)."""
        return self._ctx.namespace

    def check_crd(self) -> None:
        """MissingAPIError unless our CRD is installed (core.KubeContext.check_crd)."""
        self._ctx.check_crd()

    # ------------------------------------------------------------------ lifecycle
    def create(self, mc: MiniCluster, options: CreateOptions | None = None) -> ClusterStatus:
        return self._lifecycle.create(mc, options)

    def exists(self, mc: MiniCluster) -> bool:
        return self._lifecycle.exists(mc)

    def wait_ready(self, name: str, timeout: float) -> ClusterStatus:
        return self._lifecycle.wait_ready(name, timeout)

    def delete(self, name: str) -> None:
        self._lifecycle.delete(name)

    # ------------------------------------------------------------------ observing
    def status(self, name: str) -> ClusterStatus:
        return self._observer.status(name)

    def observe(self, name: str) -> ClusterView:
        return self._observer.observe(name)

    # ------------------------------------------------------------------ acting
    def scale(self, name: str, size: int) -> ClusterStatus:
        """Patch spec.size, then the Job's parallelism and completions together (elastic Indexed Job)."""
        self._actuator.scale_to(name, size)
        return self._observer.status(name)

    def scale_to(self, name: str, size: int) -> ScaleResult:
        return self._actuator.scale_to(name, size)

    def resize(self, name: str, index: int, cpu: str) -> ResizeResult:
        return self._actuator.resize(name, index, cpu)

    def resize_many(self, name: str, requests: Mapping[int, int]) -> dict[int, PodResize]:
        return self._actuator.resize_many(name, requests)

    # ------------------------------------------------------------------ reaching a pod
    def rest_endpoint(self, mc: MiniCluster, status: ClusterStatus) -> RestEndpoint:
        """A Service in the cluster: reachable through a port-forward (in the cluster's namespace, which need not
        be the kubeconfig context's)."""
        port = mc.spec.restful.port
        forward = f"kubectl -n {status.namespace} port-forward svc/{mc.name}-restful {port}"
        return RestEndpoint(None, f"Service {mc.name}-restful:{port}   ({forward})")

    def exec(self, name: str, index: int, argv: list[str], timeout: float = EXEC_TIMEOUT) -> ExecResult:
        ctx = self._ctx
        _, mc = ctx.load(name)
        pod = ctx.pod(mc, index)
        command = at_broker(mc, argv)
        return ctx.call(
            f"running {argv[0] if argv else ''!r} in pod index {index}",
            lambda: ctx.api.exec(ctx.namespace, pod["metadata"]["name"], runner_container(mc), command, timeout),
        )

    def logs(self, name: str, index: int = 0, follow: bool = False) -> Iterator[str]:
        ctx = self._ctx
        _, mc = ctx.load(name)
        pod = ctx.pod(mc, index)
        try:
            yield from ctx.api.logs(ctx.namespace, pod["metadata"]["name"], runner_container(mc), follow)
        except ApiError as exc:
            raise explain(exc, f"reading the logs of pod index {index}") from None

    def list(self) -> list[ClusterSummary]:  # last: in the class body, `list` names this method from here on
        return self._observer.list()
