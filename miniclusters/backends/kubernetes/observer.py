"""The Kubernetes observer: a MiniCluster's status (its pods, its Job, what the lead broker says), the Observer
port's view (no exec into the lead) and the list of MiniClusters, read through the context."""

from __future__ import annotations

from typing import cast

from elasticity.control.ports import ClusterView
from miniclusters.api.spec import MiniCluster
from miniclusters.backends.base import (
    RESIZE_IN_PROGRESS,
    RESIZE_PENDING,
    ClusterCondition,
    ClusterStatus,
    ClusterSummary,
    PodStatus,
    ResizeOutcome,
)
from miniclusters.backends.kubernetes.api import JOB, MINICLUSTER, POD
from miniclusters.backends.kubernetes.core import KubeContext, runner_container
from miniclusters.backends.kubernetes.jobs import job_outcome, registered_hosts, summary_state
from miniclusters.backends.kubernetes.lead import overlay_command
from miniclusters.backends.kubernetes.status import live_pods, pod_status, restart_count
from miniclusters.backends.overlay import overlay_ranks
from miniclusters.backends.reporting import LeadReport, Ranks, cluster_status, cluster_view, pod_view
from miniclusters.kube_shapes import Job, Pod
from miniclusters.render.layout import NAME_LABEL


class KubernetesObserver:
    """status, observe and list: reads only, given the context only."""

    def __init__(self, ctx: KubeContext) -> None:
        self._ctx = ctx

    def status(self, name: str) -> ClusterStatus:
        obj, mc = self._ctx.load(name)
        job = self._ctx.job(name)
        pods = self._ctx.pods(name)
        container = runner_container(mc)
        conditions = tuple(
            ClusterCondition(c.get("type", ""), c.get("status", ""), c.get("reason", ""), c.get("message", ""))
            for c in (obj.get("status") or {}).get("conditions", [])
        )
        finished, succeeded = job_outcome(job)
        lead = next((p for p in pods if pod_status(p).index == 0), None)
        running = lead is not None and lead.get("status", {}).get("phase") == "Running"
        namespace = self._ctx.namespace
        rest_url = (
            f"http://{mc.name}-restful.{namespace}.svc:{mc.spec.restful.port}" if mc.spec.restful.enabled else None
        )
        return cluster_status(
            mc,
            namespace,
            tuple(pod_status(p, container) for p in pods),
            LeadReport.asked(running, finished, lambda: self._ask_lead(mc, lead or {})),
            finished,
            succeeded,
            rest_url,
            conditions,
        )

    def observe(self, name: str) -> ClusterView:
        """The Observer port: GET the MiniCluster and its Job, LIST its pods (no exec into the lead)."""
        _, mc = self._ctx.load(name)
        job = self._ctx.job(name)
        container = runner_container(mc)
        views = []
        for pod in self._ctx.pods(name):
            status = pod_status(pod, container)
            reason = next((c.message for c in status.conditions if c.type == RESIZE_PENDING), "")
            views.append(pod_view(status, restart_count(pod, container), pending_resize(status), reason))
        max_size = registered_hosts(job) or mc.spec.effective_max_size
        return cluster_view(mc, tuple(views), max_size, self._ctx.clock())

    def _ask_lead(self, mc: MiniCluster, lead: Pod) -> Ranks:
        argv = overlay_command(mc)
        ctx = self._ctx
        result = ctx.call(
            "asking the lead broker (pod index 0) for `flux overlay status`",
            lambda: ctx.api.exec(ctx.namespace, lead["metadata"]["name"], runner_container(mc), argv, 20.0),
        )
        return overlay_ranks(result)

    def list(self) -> list[ClusterSummary]:
        ctx = self._ctx
        items, _ = ctx.call("listing MiniClusters", lambda: ctx.api.list_objects(MINICLUSTER, ctx.namespace))
        jobs, _ = ctx.call("listing Jobs", lambda: ctx.api.list_objects(JOB, ctx.namespace, NAME_LABEL))
        listed, _ = ctx.call("listing pods", lambda: ctx.api.list_objects(POD, ctx.namespace, NAME_LABEL))
        pods = cast("list[Pod]", listed)  # the pods as the server has them
        job_by_name = {j["metadata"]["name"]: cast(Job, j) for j in jobs}  # the Jobs as the server has them
        out = []
        for item in items:
            name = item["metadata"]["name"]
            mine = [p for p in pods if p["metadata"].get("labels", {}).get(NAME_LABEL) == name]
            ready = sum(1 for p in live_pods(mine) if pod_status(p).ready)
            size = int((item.get("spec") or {}).get("size", 1))
            state = summary_state(job_by_name.get(name), ready, size)
            out.append(ClusterSummary(name, ctx.namespace, size, ready, state))
        return out


def pending_resize(status: PodStatus) -> ResizeOutcome | None:
    """The resize state KEP-1287's conditions report (None when nothing is pending or in progress)."""
    for condition in status.conditions:
        if condition.status != "True":
            continue
        if condition.type == RESIZE_PENDING:
            return ResizeOutcome.INFEASIBLE if condition.reason == "Infeasible" else ResizeOutcome.DEFERRED
        if condition.type == RESIZE_IN_PROGRESS:
            return ResizeOutcome.IN_PROGRESS
    return None
