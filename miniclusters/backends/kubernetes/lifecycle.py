"""The Kubernetes lifecycle: client-side `up` (the MiniCluster object, then its rendered objects owned by it),
whether a cluster exists, and `down` (the garbage collector deletes what the MiniCluster owns)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from miniclusters.api.spec import MiniCluster
from miniclusters.backends.base import ClusterStatus, CreateOptions, FinishedError, InvalidRequestError, NotFoundError
from miniclusters.backends.kubernetes.api import MINICLUSTER, SECRET, ApiError
from miniclusters.backends.kubernetes.core import KubeContext, explain
from miniclusters.backends.kubernetes.objects import (
    certificate_from_secret,
    custom_resource,
    desired_objects,
    secret_name,
)
from miniclusters.backends.kubernetes.retry import with_retries
from miniclusters.kube_shapes import KubeObject
from miniclusters.render.layout import FIELD_MANAGER


class KubernetesLifecycle:
    """create, exists and delete: given the context, and the status to wait on."""

    def __init__(self, ctx: KubeContext, status: Callable[[str], ClusterStatus]) -> None:
        self._ctx = ctx
        self._status = status

    def create(self, mc: MiniCluster, options: CreateOptions | None = None) -> ClusterStatus:
        """Apply the MiniCluster object, then its rendered objects owned by it; wait for pods and brokers."""
        options = options or CreateOptions()
        ctx = self._ctx
        namespace = self.namespace_for(mc)
        ctx.namespace = namespace
        ctx.check_crd()
        if ctx.get_optional(MINICLUSTER, mc.name, namespace) is not None:
            self._refuse_finished(mc.name, namespace)
        cr = custom_resource(mc, namespace)
        owner = ctx.call(
            f"applying MiniCluster {mc.name!r}", lambda: ctx.api.apply(cr, field_manager=FIELD_MANAGER, force=True)
        )
        certificate = certificate_from_secret(ctx.get_optional(SECRET, secret_name(mc)))
        for obj in desired_objects(mc, namespace, owner, options.render, certificate):
            doing = f"applying {obj['kind']} {obj['metadata']['name']!r}"
            if obj["kind"] == "Job":
                self._apply_job(obj, doing)
            else:
                ctx.call(doing, partial(ctx.api.apply, obj, field_manager=FIELD_MANAGER, force=True))
        if not options.wait:
            return self._status(mc.name)
        return self.wait_ready(mc.name, options.timeout)

    def _refuse_finished(self, name: str, namespace: str) -> None:
        """An existing MiniCluster whose lead has finished is not run again by applying it once more (its Job is
        complete): say so, with its output and how to run it again, and change nothing, as the local backend does.
        Applying again printed the old run's output and exit code as if the run were new."""
        status = self._status(name)
        if status.finished:
            at = f"{name} --backend kubernetes -n {namespace}"
            outcome = "completed" if status.succeeded else "failed"
            raise FinishedError(
                f"MiniCluster {name!r} already exists in namespace {namespace!r} and has finished ({outcome}); "
                f"nothing was started. Its output: `minicluster logs {at}`; to run it again: "
                f"`minicluster down {at}`, then `minicluster up` again"
            )

    def wait_ready(self, name: str, timeout: float) -> ClusterStatus:
        return self._ctx.polling.wait_ready(lambda: self._status(name), timeout)

    def exists(self, mc: MiniCluster) -> bool:
        """The MiniCluster object in the namespace `create(mc)` would use (a missing CRD: none)."""
        return self._ctx.get_optional(MINICLUSTER, mc.name, self.namespace_for(mc)) is not None

    def _apply_job(self, job: KubeObject, doing: str) -> None:
        ctx = self._ctx
        try:
            with_retries(lambda: ctx.api.apply(job, field_manager=FIELD_MANAGER, force=True), sleep=ctx.sleep)
        except ApiError as exc:
            if exc.status == 422 and "template" in exc.message:
                name = job["metadata"]["name"]
                raise InvalidRequestError(
                    f"{doing}: MiniCluster {name!r} already runs with a different pod template, and a Job's pod "
                    f"template is immutable; delete it first (minicluster down {name} --backend kubernetes "
                    f"-n {self._ctx.namespace}) or change only spec.size"
                ) from None
            raise explain(exc, doing) from None

    def namespace_for(self, mc: MiniCluster) -> str:
        """--namespace wins, then the file's metadata.namespace when it sets one, then the context's default."""
        if self._ctx.namespace != self._ctx.api.namespace:
            return self._ctx.namespace
        if "namespace" in mc.metadata.model_fields_set:
            return mc.namespace
        return self._ctx.namespace

    def delete(self, name: str) -> None:
        """Delete the MiniCluster; the garbage collector deletes everything it owns."""
        ctx = self._ctx
        try:
            with_retries(lambda: ctx.api.delete(MINICLUSTER, ctx.namespace, name, "Foreground"), sleep=ctx.sleep)
        except ApiError as exc:
            if exc.not_found:
                raise NotFoundError(f"MiniCluster {name!r} not found in namespace {ctx.namespace!r}") from None
            raise explain(exc, f"deleting MiniCluster {name!r}") from None
