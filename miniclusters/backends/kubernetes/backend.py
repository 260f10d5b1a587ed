"""The Kubernetes backend: client-side `up` (no operator needed), status, scale, in-place resize, exec, logs.

Every call goes through a KubeApi (the real client or the in-memory fake). API errors become BackendErrors
that say what was being done and what to do about it; transient ones (429, 5xx) are retried with back-off.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any, TypeVar

from miniclusters.api import SpecError, load_minicluster
from miniclusters.api.quantity import parse_quantity
from miniclusters.api.spec import MiniCluster
from miniclusters.backends.base import (
    BackendError,
    ClusterCondition,
    ClusterStatus,
    ClusterSummary,
    CreateOptions,
    ExecResult,
    ForbiddenError,
    InvalidRequestError,
    MissingAPIError,
    NotFoundError,
    ResizeOutcome,
    ResizeResult,
)
from miniclusters.backends.kubernetes.api import CONFIG_MAP, JOB, MINICLUSTER, POD, SECRET, ApiError, KubeApi
from miniclusters.backends.kubernetes.lead import overlay_command, parse_overlay
from miniclusters.backends.kubernetes.objects import (
    certificate_from_secret,
    custom_resource,
    desired_objects,
    secret_name,
)
from miniclusters.backends.kubernetes.retry import with_retries
from miniclusters.backends.kubernetes.status import live_pods, pod_status, resize_outcome
from miniclusters.backends.kubernetes.wait import ProgressCallback, wait_until_ready
from miniclusters.backends.policy import check_scale
from miniclusters.render.layout import FIELD_MANAGER, NAME_LABEL, config_map_name

T = TypeVar("T")
CRD_HINT = "install it with: minicluster crd | kubectl apply --server-side -f -"


def explain(error: ApiError, doing: str) -> BackendError:
    """A BackendError naming the action, the server's words, and the fix where we know it."""
    if error.status == 403:
        return ForbiddenError(f"{doing}: forbidden by RBAC: {error.message}")
    if error.status == 404:
        return NotFoundError(f"{doing}: {error.message}")
    if error.status in (400, 422):
        return InvalidRequestError(f"{doing}: rejected by the API server: {error.message}")
    if error.status == 409:
        return BackendError(f"{doing}: conflicting update, try again: {error.message}")
    return BackendError(f"{doing}: {error.status} {error.reason}: {error.message}")


def runner_container(mc: MiniCluster) -> str:
    """Name of the container that runs the broker (as the renderer names it)."""
    return mc.spec.containers[mc.spec.flux_runner_index].name or mc.name


class KubernetesBackend:
    """Backend over a Kubernetes API server (1.27+ for elastic Indexed Jobs, 1.33+ for in-place resize)."""

    name = "kubernetes"

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
    ) -> None:
        if api is None:
            from miniclusters.backends.kubernetes.client import RealKubeApi

            api = RealKubeApi.from_kubeconfig(context, namespace)
        self.api = api
        self.namespace = namespace or api.namespace
        self.progress = progress
        self.clock = clock
        self.sleep = sleep
        self.poll_interval = poll_interval
        self.resize_wait = resize_wait

    # ------------------------------------------------------------------ plumbing
    def _call(self, doing: str, call: Callable[[], T]) -> T:
        try:
            return with_retries(call, sleep=self.sleep)
        except ApiError as exc:
            raise explain(exc, doing) from None

    def _get_optional(self, kind: Any, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        try:
            return with_retries(lambda: self.api.get(kind, namespace or self.namespace, name), sleep=self.sleep)
        except ApiError as exc:
            if exc.not_found:
                return None
            raise explain(exc, f"reading {kind.kind} {name!r}") from None

    def check_crd(self) -> None:
        """MissingAPIError unless our CRD is installed (the API group/version is served)."""
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

    def _load(self, name: str) -> tuple[dict[str, Any], MiniCluster]:
        obj = self._get_optional(MINICLUSTER, name)
        if obj is None:
            raise NotFoundError(f"MiniCluster {name!r} not found in namespace {self.namespace!r}")
        data = {k: v for k, v in obj.items() if k != "status"}
        try:
            return obj, load_minicluster(data, source=f"MiniCluster {name}")
        except SpecError as exc:
            raise InvalidRequestError(str(exc)) from None

    def _pods(self, name: str) -> list[dict[str, Any]]:
        items, _ = self._call(
            f"listing the pods of {name!r}", lambda: self.api.list_objects(POD, self.namespace, f"{NAME_LABEL}={name}")
        )
        return [dict(p) for p in live_pods(items)]

    def _pod(self, mc: MiniCluster, index: int) -> dict[str, Any]:
        pods = {pod_status(p).index: p for p in self._pods(mc.name)}
        if index not in pods:
            have = ", ".join(map(str, sorted(pods))) or "none"
            raise InvalidRequestError(
                f"MiniCluster {mc.name!r} has no pod with index {index} (pod indexes present: {have}; "
                f"size is {mc.spec.size})"
            )
        return pods[index]

    # ------------------------------------------------------------------ create
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

    # ------------------------------------------------------------------ status
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
        ranks_up = ranks_down = None
        lead_error = None
        lead = next((p for p in pods if pod_status(p).index == 0), None)
        if lead is not None and lead.get("status", {}).get("phase") == "Running":
            try:
                ranks_up, ranks_down = self._ask_lead(mc, lead)
            except BackendError as exc:
                lead_error = str(exc)
        elif not finished:
            lead_error = "the lead pod (index 0) is not running yet"
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
        )

    def _ask_lead(self, mc: MiniCluster, lead: dict[str, Any]) -> tuple[tuple[int, ...], tuple[int, ...]]:
        argv = overlay_command(mc)
        result = self._call(
            "asking the lead broker (pod index 0) for `flux overlay status`",
            lambda: self.api.exec(self.namespace, lead["metadata"]["name"], runner_container(mc), argv, 20.0),
        )
        if result.rc != 0:
            raise BackendError(f"`flux overlay status` in the lead pod exited {result.rc}: {result.stderr.strip()}")
        try:
            return parse_overlay(result.stdout)
        except (ValueError, KeyError) as exc:
            raise BackendError(f"unexpected `flux overlay status` output: {exc}") from None

    # ------------------------------------------------------------------ scale
    def scale(self, name: str, size: int) -> ClusterStatus:
        """Patch spec.size, then the Job's parallelism and completions together (elastic Indexed Job)."""
        obj, mc = self._load(name)
        check_scale(mc.spec.min_size, mc.spec.effective_max_size, size, name)
        self._call(
            f"setting spec.size of MiniCluster {name!r}",
            lambda: self.api.patch(
                MINICLUSTER,
                self.namespace,
                name,
                {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]}, "spec": {"size": size}},
                field_manager=FIELD_MANAGER,
            ),
        )
        for _ in range(5):
            job = self._get_optional(JOB, name)
            if job is None:
                raise NotFoundError(f"MiniCluster {name!r} has no Job (was it created with `minicluster up`?)")
            patch = scale_patch(job, size)
            if patch is None:
                break
            try:
                with_retries(
                    partial(self.api.patch, JOB, self.namespace, name, patch, field_manager=FIELD_MANAGER),
                    sleep=self.sleep,
                )
            except ApiError as exc:
                if exc.conflict:
                    continue  # someone else changed the Job: read it again
                raise explain(exc, f"scaling Job {name!r} to {size}") from None
        self._refresh_config(mc.model_copy(update={"spec": mc.spec.model_copy(update={"size": size})}))
        return self.status(name)

    def _refresh_config(self, mc: MiniCluster) -> None:
        """Re-apply the ConfigMap (its entrypoint mentions the size); pods started after a scale-up read it."""
        existing = self._get_optional(CONFIG_MAP, config_map_name(mc))
        if existing is None:
            return
        owner, _ = self._load(mc.name)
        certificate = certificate_from_secret(self._get_optional(SECRET, secret_name(mc)))
        from miniclusters.render import RenderOptions

        for obj in desired_objects(mc, self.namespace, owner, RenderOptions(), certificate):
            if obj["kind"] == "ConfigMap":
                self._call(
                    f"updating ConfigMap {obj['metadata']['name']!r}",
                    partial(self.api.apply, obj, field_manager=FIELD_MANAGER, force=True),
                )

    # ------------------------------------------------------------------ resize
    def resize(self, name: str, index: int, cpu: str) -> ResizeResult:
        """Change pod `index`'s CPU request in place through the pod `resize` subresource; never restarts it."""
        try:
            parse_quantity(cpu)
        except ValueError as exc:
            raise InvalidRequestError(f"--cpu: {exc}") from None
        _, mc = self._load(name)
        pod = self._pod(mc, index)
        container = runner_container(mc)
        pod_name = pod["metadata"]["name"]
        body = {"spec": {"containers": [{"name": container, "resources": {"requests": {"cpu": cpu}}}]}}
        pod = self._call(
            f"resizing pod {pod_name} (index {index}) to cpu {cpu}",
            lambda: self.api.patch(
                POD, self.namespace, pod_name, body, "strategic", subresource="resize", field_manager=FIELD_MANAGER
            ),
        )
        deadline = self.clock() + self.resize_wait
        while True:
            outcome, message = resize_outcome(pod, cpu, container)
            if outcome not in (ResizeOutcome.ACCEPTED, ResizeOutcome.IN_PROGRESS) or self.clock() >= deadline:
                break
            self.sleep(min(self.poll_interval, 1.0))
            pod = self._call(f"reading pod {pod_name}", lambda: self.api.get(POD, self.namespace, pod_name))
        return ResizeResult(index, pod_name, outcome, message, cpu, pod_status(pod, container).cpu_actual)

    # ------------------------------------------------------------------ exec, logs, delete, list
    def exec(self, name: str, index: int, argv: list[str]) -> ExecResult:
        _, mc = self._load(name)
        pod = self._pod(mc, index)
        return self._call(
            f"running {argv[0] if argv else ''!r} in pod index {index}",
            lambda: self.api.exec(self.namespace, pod["metadata"]["name"], runner_container(mc), argv, 3600.0),
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


def job_outcome(job: dict[str, Any] | None) -> tuple[bool, bool | None]:
    """(finished, succeeded) from the Job's Complete / Failed conditions."""
    for condition in (job or {}).get("status", {}).get("conditions", []) or []:
        if condition.get("status") != "True":
            continue
        if condition.get("type") == "Complete":
            return True, True
        if condition.get("type") == "Failed":
            return True, False
    return False, None


def summary_state(job: dict[str, Any] | None, ready: int, size: int) -> str:
    finished, succeeded = job_outcome(job)
    if finished:
        return "Completed" if succeeded else "Failed"
    if job is None:
        return "Pending"
    return "Ready" if ready >= size else "Starting"


def scale_patch(job: dict[str, Any], size: int) -> dict[str, Any] | None:
    """The next merge patch towards `size`, guarded by resourceVersion; None when the Job is there already.

    Completions may change only together with parallelism, keeping them equal (elastic Indexed Jobs); a Job
    whose parallelism was changed alone is first brought back to parallelism == completions.
    """
    spec = job.get("spec", {})
    completions, parallelism = spec.get("completions"), spec.get("parallelism")
    version = {"resourceVersion": job["metadata"]["resourceVersion"]}
    if completions == parallelism == size:
        return None
    if completions != parallelism:
        return {"metadata": version, "spec": {"parallelism": completions}}
    return {"metadata": version, "spec": {"parallelism": size, "completions": size}}
