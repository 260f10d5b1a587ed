"""The Kubernetes custom metrics API (custom.metrics.k8s.io/v1beta2) on the lead, as flux-metrics-api serves it.

A HorizontalPodAutoscaler asks for an Object metric of the MiniCluster (or of a pod) and gets one value computed
from the instance now. Metric names (REFERENCE.md section 3): node_up_count, node_free_count,
node_cores_free_count, node_cores_up_count and job_queue_state_{new,depend,priority,sched,run,cleanup,
inactive}_count. Read-only and unauthenticated (it names counts, never jobs); behind the aggregator the API
server authenticates the caller.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping
from typing import Any, NotRequired, TypedDict, cast

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from broker.jobs.shapes import JobStats
from broker.payloads import QueueState, ResourceStatus
from broker.rest.json_types import Responses
from common import idset

GROUP_VERSION = "custom.metrics.k8s.io/v1beta2"
PREFIX = f"/apis/{GROUP_VERSION}"
JOB_STATES = ("new", "depend", "priority", "sched", "run", "cleanup", "inactive")
METRIC_NAMES = (
    "node_up_count",
    "node_free_count",
    "node_cores_free_count",
    "node_cores_up_count",
    *(f"job_queue_state_{state}_count" for state in JOB_STATES),
)
Source = Callable[[], Mapping[str, int]]
"""Every metric's value now (one RPC round per request)."""
SourceFor = Callable[[str, str | None, str], Mapping[str, int]]
"""(kind, namespace, name) -> every metric's value now for that object: how a server of many instances (the
operator, behind the API server's aggregator) reads the lead of the MiniCluster asked about."""


def compute_metrics(resources: ResourceStatus, queue_state: QueueState, stats: JobStats) -> dict[str, int]:
    """From `resource.status`, `job-manager.queue-state` and `job-manager.stats` answers (pure)."""
    up = set(idset.decode(str(resources.get("up", ""))))
    reports = {int(rank): report for rank, report in dict(resources.get("reports", {})).items()}
    cores_up = sum(int(reports[rank].get("ncores", 0)) for rank in up if rank in reports)
    busy_ranks: set[int] = set()
    used: dict[int, int] = {}
    for job in queue_state.get("running", []):
        busy_ranks.update(int(r) for r in job.get("ranks", []))
        for rank, n in dict(job.get("cores", {})).items():
            used[int(rank)] = used.get(int(rank), 0) + int(n)
    cores_used = sum(n for rank, n in used.items() if rank in up)
    # a drained rank takes no new jobs: none of it is free (as `flux resource list` shows it)
    drained = {int(r) for r in queue_state.get("drained", [])} & up
    held = sum(max(0, int(reports.get(r, {}).get("ncores", 0)) - used.get(r, 0)) for r in drained)
    states = dict(stats.get("states", {}))
    values = {
        "node_up_count": len(up),
        "node_free_count": len(up - busy_ranks - drained),
        "node_cores_free_count": max(0, cores_up - cores_used - held),
        "node_cores_up_count": cores_up,
    }
    for state in JOB_STATES:
        values[f"job_queue_state_{state}_count"] = int(states.get(state, 0))
    return values


def broker_source(uri: str) -> Source:
    """Metrics of the built-in broker at ``uri``."""

    def read() -> Mapping[str, int]:
        from broker.jobs.api import LEAD, JobClient

        with JobClient(uri) as client:
            resources = client.resources()
            queue_state = cast(QueueState, client.handle.rpc("job-manager.queue-state", {}, LEAD, 30.0))
            return compute_metrics(resources, queue_state, client.stats())

    return read


class Status(TypedDict):
    """A Kubernetes Status object (a failure)."""

    kind: str
    apiVersion: str
    metadata: dict[str, str]
    status: str
    message: str
    reason: str
    code: int


def _status(code: int, reason: str, message: str) -> JSONResponse:
    body = Status(
        kind="Status", apiVersion="v1", metadata={}, status="Failure", message=message, reason=reason, code=code
    )
    return JSONResponse(body, status_code=code)


_STATUS = {
    "description": "a Kubernetes Status object (kind Status, reason, message, code)",
    "content": {"application/json": {"schema": {"type": "object"}}},
}
VALUE_ERRORS: Responses = {
    404: {**_STATUS, "description": "the metric is not one this lead serves (a Status naming the ones it does)"},
    503: {**_STATUS, "description": "the instance could not be read now (the HPA keeps its last decision)"},
}


class APIResource(TypedDict):
    name: str
    singularName: str
    namespaced: bool
    kind: str
    verbs: list[str]


class APIResourceList(TypedDict):
    kind: str
    apiVersion: str
    groupVersion: str
    resources: list[APIResource]


class DescribedObject(TypedDict):
    kind: str
    name: str
    apiVersion: str
    namespace: NotRequired[str]


class MetricValue(TypedDict):
    describedObject: DescribedObject
    metric: dict[str, str]
    timestamp: str
    value: str


class MetricValueList(TypedDict):
    kind: str
    apiVersion: str
    metadata: dict[str, str]
    items: list[MetricValue]


def resources() -> APIResourceList:
    """APIResourceList: the metrics this lead serves."""
    return APIResourceList(
        kind="APIResourceList",
        apiVersion="v1",
        groupVersion=GROUP_VERSION,
        resources=[
            APIResource(name=f"*/{name}", singularName="", namespaced=True, kind="MetricValueList", verbs=["get"])
            for name in METRIC_NAMES
        ],
    )


def _one_source(source: Source) -> SourceFor:
    """A SourceFor answering every object from the one lead `source` reads."""

    def source_for(_kind: str, _namespace: str | None, _name: str) -> Mapping[str, int]:
        return source()

    return source_for


def _utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class MetricValues:
    """The value routes (bound methods), answering from `source_for` at `clock`'s time: a router may serve one
    lead (the broker's own) or many (the operator's), so what it reads is the router's, not the app's."""

    def __init__(self, source_for: SourceFor, clock: Callable[[], datetime.datetime]) -> None:
        self.source_for = source_for
        self.clock = clock

    def value_list(
        self, kind: str, namespace: str | None, name: str, metric: str, api_version: str
    ) -> MetricValueList | JSONResponse:
        if metric not in METRIC_NAMES:
            return _status(
                404, "NotFound", f"metric {metric!r} is not served here (choose from {', '.join(METRIC_NAMES)})"
            )
        try:
            values = self.source_for(kind, namespace, name)
        except LookupError as exc:  # no such object (or not one that has a lead)
            return _status(404, "NotFound", str(exc))
        except Exception as exc:  # the instance is down or busy: the HPA keeps its last decision
            return _status(503, "ServiceUnavailable", f"cannot read the instance: {exc}")
        described = DescribedObject(kind=kind, name=name, apiVersion=api_version)
        if namespace is not None:
            described["namespace"] = namespace
        stamp = self.clock().strftime("%Y-%m-%dT%H:%M:%SZ")
        item = MetricValue(
            describedObject=described, metric={"name": metric}, timestamp=stamp, value=str(int(values[metric]))
        )
        return MetricValueList(kind="MetricValueList", apiVersion=GROUP_VERSION, metadata={}, items=[item])

    def namespace_metric(self, namespace: str, metric: str) -> MetricValueList | JSONResponse:
        return self.value_list("Namespace", None, namespace, metric, "v1")

    def object_metric(self, namespace: str, resource: str, name: str, metric: str) -> MetricValueList | JSONResponse:
        kind, api_version = _kind(resource)
        return self.value_list(kind, namespace, name, metric, api_version)

    def cluster_metric(self, resource: str, name: str, metric: str) -> MetricValueList | JSONResponse:
        kind, api_version = _kind(resource)
        return self.value_list(kind, None, name, metric, api_version)


def metrics_router(
    source: Source | None = None,
    clock: Callable[[], datetime.datetime] | None = None,
    source_for: SourceFor | None = None,
) -> APIRouter:
    """The API's routes, answering from ``source`` (this lead) or ``source_for`` (the object asked about)."""
    if source_for is None:
        assert source is not None
        source_for = _one_source(source)
    values = MetricValues(source_for, clock or _utc_now)
    router = APIRouter(prefix=PREFIX, tags=["custom metrics"])
    # response_model: the free-form objects these routes' schemas have always said
    router.add_api_route("", resources, methods=["GET"], response_model=dict)
    for path, endpoint in (
        ("/namespaces/{namespace}/metrics/{metric}", values.namespace_metric),
        ("/namespaces/{namespace}/{resource}/{name}/{metric}", values.object_metric),
        ("/{resource}/{name}/{metric}", values.cluster_metric),
    ):
        router.add_api_route(path, endpoint, methods=["GET"], responses=VALUE_ERRORS, response_model=Any)
    return router


def _kind(resource: str) -> tuple[str, str]:
    """'miniclusters.miniclusters.dev' -> ('MiniCluster', 'miniclusters.dev/v1alpha1'); 'pods' -> ('Pod', 'v1')."""
    plural, _, group = resource.partition(".")
    known = {"miniclusters": ("MiniCluster", "miniclusters.dev/v1alpha1"), "pods": ("Pod", "v1")}
    if plural in known and (not group or plural == "pods" or group == "miniclusters.dev"):
        return known[plural]
    return plural[:1].upper() + plural[1:].rstrip("s"), group or "v1"


def main() -> None:
    """`python3 -m broker.rest.metrics`: every metric of the broker at $FLUX_URI as one JSON object (how the
    operator's custom metrics API reads a lead through exec)."""
    import json
    import os
    import sys

    uri = os.environ.get("FLUX_URI")
    if not uri:
        sys.exit("FLUX_URI is not set: run it where the broker's socket is")
    print(json.dumps(dict(broker_source(uri)())))


if __name__ == "__main__":
    main()
