"""The Kubernetes backend: client-side `up` (no operator needed), status, scale, in-place resize, exec, logs.

Every call goes through a KubeApi (the real client or the in-memory fake). API errors become BackendErrors
that say what was being done and what to do about it; transient ones (429, 5xx) are retried with back-off.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import Any

from elasticity.control.ports import ClusterView, PodView
from miniclusters.api.quantity import cpu_millicores
from miniclusters.api.spec import MiniCluster
from miniclusters.backends.base import (
    EXEC_TIMEOUT,
    RESIZE_IN_PROGRESS,
    RESIZE_PENDING,
    ClusterCondition,
    ClusterStatus,
    ClusterSummary,
    CreateOptions,
    ExecResult,
    InvalidRequestError,
    NotFoundError,
    PodStatus,
    ResizeOutcome,
    RestEndpoint,
)
from miniclusters.backends.kubernetes.actuate import KubernetesActuator
from miniclusters.backends.kubernetes.api import JOB, MINICLUSTER, POD, SECRET, ApiError
from miniclusters.backends.kubernetes.core import explain, runner_container
from miniclusters.backends.kubernetes.jobs import job_outcome, registered_hosts, summary_state
from miniclusters.backends.kubernetes.lead import at_broker, overlay_command
from miniclusters.backends.kubernetes.objects import (
    certificate_from_secret,
    custom_resource,
    desired_objects,
    secret_name,
)
from miniclusters.backends.kubernetes.retry import with_retries
from miniclusters.backends.kubernetes.status import live_pods, pod_status, restart_count
from miniclusters.backends.overlay import lead_ranks, overlay_ranks
from miniclusters.backends.wait import wait_until_ready
from miniclusters.render.layout import FIELD_MANAGER, NAME_LABEL


class KubernetesBackend(KubernetesActuator):
    """Backend over a Kubernetes API server (1.27+ for elastic Indexed Jobs, 1.33+ for in-place resize)."""

    def rest_endpoint(self, mc: MiniCluster, status: ClusterStatus) -> RestEndpoint:
        """A Service in the cluster: reachable through a port-forward."""
        port = mc.spec.restful.port
        return RestEndpoint(
            None, f"Service {mc.name}-restful:{port}   (kubectl port-forward svc/{mc.name}-restful {port})"
        )

    def create(self, mc: MiniCluster, options: CreateOptions | None = None) -> ClusterStatus:
        """Apply the MiniCluster object, then its rendered objects owned by it; wait for pods and brokers."""
        options = options or CreateOptions()
        namespace = self._namespace_for(mc)
        self.namespace = namespace
        self.check_crd()
        cr = custom_resource(mc, namespace)
        owner = self._call(
            f"applying MiniCluster {mc.name!r}", lambda: self.api.apply(cr, field_manager=FIELD_MANAGER, force=True)
        )
        certificate = certificate_from_secret(self._get_optional(SECRET, secret_name(mc)))
        for obj in desired_objects(mc, namespace, owner, options.render, certificate):
            doing = f"applying {obj['kind']} {obj['metadata']['name']!r}"
            if obj["kind"] == "Job":
                self._apply_job(obj, doing)
            else:
                self._call(doing, partial(self.api.apply, obj, field_manager=FIELD_MANAGER, force=True))
        if not options.wait:
            return self.status(mc.name)
        return self.wait_ready(mc.name, options.timeout)

    def exists(self, mc: MiniCluster) -> bool:
        """The MiniCluster object in the namespace `create(mc)` would use (a missing CRD: none)."""
        return self._get_optional(MINICLUSTER, mc.name, self._namespace_for(mc)) is not None

    def _apply_job(self, job: dict[str, Any], doing: str) -> None:
        try:
            with_retries(lambda: self.api.apply(job, field_manager=FIELD_MANAGER, force=True), sleep=self.sleep)
        except ApiError as exc:
            if exc.status == 422 and "template" in exc.message:
                name = job["metadata"]["name"]
                raise InvalidRequestError(
                    f"{doing}: MiniCluster {name!r} already runs with a different pod template, and a Job's pod "
                    f"template is immutable; delete it first (minicluster down {name}) or change only spec.size"
                ) from None
            raise explain(exc, doing) from None

    def _namespace_for(self, mc: MiniCluster) -> str:
        """--namespace wins, then the file's metadata.namespace when it sets one, then the context's default."""
        if self.namespace != self.api.namespace:
            return self.namespace
        if "namespace" in mc.metadata.model_fields_set:
            return mc.namespace
        return self.namespace

    def wait_ready(self, name: str, timeout: float) -> ClusterStatus:
        return wait_until_ready(
            lambda: self.status(name),
            timeout=timeout,
            clock=self.clock,
            sleep=self.sleep,
            interval=self.poll_interval,
            progress=self.progress,
        )

    def status(self, name: str) -> ClusterStatus:
        obj, mc = self._load(name)
        job = self._get_optional(JOB, name)
        pods = self._pods(name)
        container = runner_container(mc)
        statuses = tuple(pod_status(p, container) for p in pods)
        conditions = [
            ClusterCondition(c.get("type", ""), c.get("status", ""), c.get("reason", ""), c.get("message", ""))
            for c in (obj.get("status") or {}).get("conditions", [])
        ]
        finished, succeeded = job_outcome(job)
        lead = next((p for p in pods if pod_status(p).index == 0), None)
        running = lead is not None and lead.get("status", {}).get("phase") == "Running"
        ranks_up, ranks_down, lead_error = lead_ranks(running, finished, lambda: self._ask_lead(mc, lead or {}))
        return ClusterStatus(
            name=name,
            namespace=self.namespace,
            size=mc.spec.size,
            max_size=mc.spec.effective_max_size,
            min_size=mc.spec.min_size,
            pods=statuses,
            ranks_up=ranks_up,
            ranks_down=ranks_down,
            conditions=tuple(conditions),
            finished=finished,
            succeeded=succeeded,
            lead_error=lead_error,
            rest_url=(
                f"http://{mc.name}-restful.{self.namespace}.svc:{mc.spec.restful.port}"
                if mc.spec.restful.enabled
                else None
            ),
        )

    def observe(self, name: str) -> ClusterView:
        """The Observer port: GET the MiniCluster and its Job, LIST its pods (no exec into the lead)."""
        _, mc = self._load(name)
        job = self._get_optional(JOB, name)
        container = runner_container(mc)
        pods = []
        for pod in self._pods(name):
            status = pod_status(pod, container)
            pods.append(
                PodView(
                    index=status.index,
                    name=status.name,
                    phase=status.phase,
                    ready=status.ready,
                    cpu_request=_milli(status.cpu_desired),
                    cpu_actual=_milli(status.cpu_actual),
                    restarts=restart_count(pod, container),
                    resize=_pending_resize(status),
                    resize_reason=next((c.message for c in status.conditions if c.type == RESIZE_PENDING), ""),
                    node=status.node,
                )
            )
        return ClusterView(
            name=name,
            size=mc.spec.size,
            min_size=mc.spec.min_size,
            max_size=registered_hosts(job) or mc.spec.effective_max_size,
            pods=tuple(pods),
            observed_at=self.clock(),
        )

    def _ask_lead(self, mc: MiniCluster, lead: dict[str, Any]) -> tuple[tuple[int, ...], tuple[int, ...]]:
        argv = overlay_command(mc)
        result = self._call(
            "asking the lead broker (pod index 0) for `flux overlay status`",
            lambda: self.api.exec(self.namespace, lead["metadata"]["name"], runner_container(mc), argv, 20.0),
        )
        return overlay_ranks(result)

    def exec(self, name: str, index: int, argv: list[str], timeout: float = EXEC_TIMEOUT) -> ExecResult:
        _, mc = self._load(name)
        pod = self._pod(mc, index)
        command = at_broker(mc, argv)
        return self._call(
            f"running {argv[0] if argv else ''!r} in pod index {index}",
            lambda: self.api.exec(self.namespace, pod["metadata"]["name"], runner_container(mc), command, timeout),
        )

    def logs(self, name: str, index: int = 0, follow: bool = False) -> Iterator[str]:
        _, mc = self._load(name)
        pod = self._pod(mc, index)
        try:
            yield from self.api.logs(self.namespace, pod["metadata"]["name"], runner_container(mc), follow)
        except ApiError as exc:
            raise explain(exc, f"reading the logs of pod index {index}") from None

    def delete(self, name: str) -> None:
        """Delete the MiniCluster; the garbage collector deletes everything it owns."""
        try:
            with_retries(lambda: self.api.delete(MINICLUSTER, self.namespace, name, "Foreground"), sleep=self.sleep)
        except ApiError as exc:
            if exc.not_found:
                raise NotFoundError(f"MiniCluster {name!r} not found in namespace {self.namespace!r}") from None
            raise explain(exc, f"deleting MiniCluster {name!r}") from None

    def list(self) -> list[ClusterSummary]:
        items, _ = self._call("listing MiniClusters", lambda: self.api.list_objects(MINICLUSTER, self.namespace))
        jobs, _ = self._call("listing Jobs", lambda: self.api.list_objects(JOB, self.namespace, NAME_LABEL))
        pods, _ = self._call("listing pods", lambda: self.api.list_objects(POD, self.namespace, NAME_LABEL))
        job_by_name = {j["metadata"]["name"]: j for j in jobs}
        out = []
        for item in items:
            name = item["metadata"]["name"]
            mine = [p for p in pods if p["metadata"].get("labels", {}).get(NAME_LABEL) == name]
            ready = sum(1 for p in live_pods(mine) if pod_status(p).ready)
            size = int((item.get("spec") or {}).get("size", 1))
            out.append(
                ClusterSummary(name, self.namespace, size, ready, summary_state(job_by_name.get(name), ready, size))
            )
        return out


def _milli(quantity: str | None) -> int | None:
    return cpu_millicores(quantity) if quantity is not None else None


def _pending_resize(status: PodStatus) -> ResizeOutcome | None:
    """The resize state KEP-1287's conditions report (None when nothing is pending or in progress)."""
    for condition in status.conditions:
        if condition.status != "True":
            continue
        if condition.type == RESIZE_PENDING:
            return ResizeOutcome.INFEASIBLE if condition.reason == "Infeasible" else ResizeOutcome.DEFERRED
        if condition.type == RESIZE_IN_PROGRESS:
            return ResizeOutcome.IN_PROGRESS
    return None
