"""The Kubernetes actuator: the one writer of a MiniCluster's size (spec.size, then its Job) and of its pods'
CPU requests (the pods' `resize` subresource)."""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import cast

from elasticity.control.ports import PodResize, ScaleResult
from miniclusters.api.quantity import cpu_millicores, format_millicores
from miniclusters.api.spec import MiniCluster
from miniclusters.backends.base import (
    InvalidRequestError,
    NotFoundError,
    ResizeOutcome,
    ResizeResult,
    no_such_pod,
    requested_millicores,
)
from miniclusters.backends.kubernetes.api import CONFIG_MAP, JOB, MINICLUSTER, POD, SECRET, ApiError
from miniclusters.backends.kubernetes.core import KubeContext, explain, runner_container
from miniclusters.backends.kubernetes.jobs import registered_hosts, scale_patch
from miniclusters.backends.kubernetes.objects import certificate_from_secret, desired_objects, secret_name
from miniclusters.backends.kubernetes.retry import with_retries
from miniclusters.backends.kubernetes.status import pod_status, resize_outcome
from miniclusters.backends.policy import check_scale, spec_size_patch
from miniclusters.kube_shapes import Pod
from miniclusters.render.layout import FIELD_MANAGER, config_map_name


class KubernetesActuator:
    """scale and resize: given the context only."""

    def __init__(self, ctx: KubeContext) -> None:
        self._ctx = ctx

    def scale_to(self, name: str, size: int) -> ScaleResult:
        """The Actuator's scale: patch spec.size, then the Job's parallelism and completions together (elastic
        Indexed Job). The ceiling is the hosts the Job's pods were created with, not spec.size."""
        obj, mc = self._ctx.load(name)
        job = self._ctx.job(name)
        registered = registered_hosts(job) or mc.spec.effective_max_size
        check_scale(mc.spec.min_size, registered, size, name)
        change = spec_size_patch(obj.get("spec") or {}, size, registered)
        self._ctx.call(
            f"setting spec.size of MiniCluster {name!r}",
            lambda: self._ctx.api.patch(
                MINICLUSTER,
                self._ctx.namespace,
                name,
                {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]}, "spec": change},
                field_manager=FIELD_MANAGER,
            ),
        )
        for _ in range(5):
            if job is None:
                raise NotFoundError(f"MiniCluster {name!r} has no Job (was it created with `minicluster up`?)")
            patch = scale_patch(job, size)
            if patch is None:
                break
            try:
                with_retries(
                    partial(self._ctx.api.patch, JOB, self._ctx.namespace, name, patch, field_manager=FIELD_MANAGER),
                    sleep=self._ctx.sleep,
                )
            except ApiError as exc:
                if not exc.conflict:
                    raise explain(exc, f"scaling Job {name!r} to {size}") from None
            job = self._ctx.job(name)  # changed by us or by someone else: read it again
        self._refresh_config(mc.model_copy(update={"spec": mc.spec.model_copy(update=_spec_fields(change))}))
        return ScaleResult(name, mc.spec.size, size)

    def _refresh_config(self, mc: MiniCluster) -> None:
        """Re-apply the ConfigMap (its entrypoint mentions the size); pods started after a scale-up read it."""
        existing = self._ctx.get_optional(CONFIG_MAP, config_map_name(mc))
        if existing is None:
            return
        owner, _ = self._ctx.load(mc.name)
        certificate = certificate_from_secret(self._ctx.get_optional(SECRET, secret_name(mc)))
        from miniclusters.render import RenderOptions

        for obj in desired_objects(mc, self._ctx.namespace, owner, RenderOptions(), certificate):
            if obj["kind"] == "ConfigMap":
                self._ctx.call(
                    f"updating ConfigMap {obj['metadata']['name']!r}",
                    partial(self._ctx.api.apply, obj, field_manager=FIELD_MANAGER, force=True),
                )

    def resize(self, name: str, index: int, cpu: str) -> ResizeResult:
        """Change pod `index`'s CPU request in place through the pod `resize` subresource; never restarts it."""
        answer, pod_name = self._resize_pods(name, {index: requested_millicores(cpu)})[index]
        return ResizeResult.answered(index, pod_name, answer, cpu)

    def resize_many(self, name: str, requests: Mapping[int, int]) -> dict[int, PodResize]:
        """The Actuator's resize: one observe (GET the MiniCluster, LIST its pods), one PATCH of the `resize`
        subresource per pod, then one LIST per poll until the kubelet answered for every pod (or resize_wait)."""
        return {index: answer for index, (answer, _) in self._resize_pods(name, requests).items()}

    def _resize_pods(self, name: str, requests: Mapping[int, int]) -> dict[int, tuple[PodResize, str]]:
        _, mc = self._ctx.load(name)
        container = runner_container(mc)
        pods = {pod_status(p).index: p for p in self._ctx.pods(name)}
        for index, milli in requests.items():
            if index not in pods:
                raise no_such_pod(name, index, pods, mc.spec.size)
            if milli < 0:
                raise InvalidRequestError(f"pod index {index}: negative CPU request {milli}m")
        names = {index: pods[index]["metadata"]["name"] for index in requests}
        refused: dict[int, PodResize] = {}
        for index in sorted(requests):
            cpu = format_millicores(requests[index])
            body = {"spec": {"containers": [{"name": container, "resources": {"requests": {"cpu": cpu}}}]}}
            try:
                resized = with_retries(
                    partial(
                        self._ctx.api.patch,
                        POD,
                        self._ctx.namespace,
                        names[index],
                        body,
                        "strategic",
                        subresource="resize",
                        field_manager=FIELD_MANAGER,
                    ),
                    sleep=self._ctx.sleep,
                )
                pods[index] = cast(Pod, resized)  # the resized pod, as the API returns it
            except ApiError as exc:
                if not is_capacity_refusal(exc):
                    raise explain(exc, f"resizing pod {names[index]} (index {index}) to cpu {cpu}") from None
                # The apiserver's PodResize admission (Kubernetes 1.33+) refuses what the node could never hold,
                # before the kubelet sees it: the kubelet's Infeasible, said sooner. The pod keeps its CPU.
                actual = pod_status(pods[index], container).cpu_actual
                current = cpu_millicores(actual) if actual is not None else None
                why = f"more than the node's capacity: {exc.message}"
                refused[index] = PodResize(index, ResizeOutcome.INFEASIBLE, why, requests[index], current)
        deadline = self._ctx.clock() + self._ctx.resize_wait
        while True:
            answers = {
                index: refused.get(index) or self._answer(pods[index], index, requests[index], container)
                for index in requests
            }
            settled = all(
                a.outcome not in (ResizeOutcome.ACCEPTED, ResizeOutcome.IN_PROGRESS) for a in answers.values()
            )
            if settled or self._ctx.clock() >= deadline:
                return {index: (answers[index], names[index]) for index in requests}
            self._ctx.sleep(min(self._ctx.polling.interval, 1.0))
            fresh = {pod_status(p).index: p for p in self._ctx.pods(name)}
            pods.update({index: fresh[index] for index in requests if index in fresh})

    @staticmethod
    # open: a pod as the API returns it
    def _answer(pod: Pod, index: int, milli: int, container: str) -> PodResize:
        outcome, message = resize_outcome(pod, format_millicores(milli), container)
        actual = pod_status(pod, container).cpu_actual
        return PodResize(index, outcome, message, milli, cpu_millicores(actual) if actual is not None else None)


def is_capacity_refusal(error: ApiError) -> bool:
    """The apiserver's PodResize admission refusing a resize larger than the node's allocatable resources:
    403 Forbidden with the cause NodeCapacity (plugin/pkg/admission/podresize in Kubernetes)."""
    return error.status == 403 and "NodeCapacity" in error.causes


def _spec_fields(change: Mapping[str, int]) -> dict[str, int]:
    """spec_size_patch's camelCase keys as the pydantic model's field names."""
    return {{"maxSize": "max_size"}.get(k, k): v for k, v in change.items()}
