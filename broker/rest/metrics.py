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
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

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


def compute_metrics(
    resources: Mapping[str, Any], queue_state: Mapping[str, Any], stats: Mapping[str, Any]
) -> dict[str, int]:
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
            queue_state = client.handle.rpc("job-manager.queue-state", {}, LEAD, 30.0)
            return compute_metrics(resources, queue_state, client.stats())

    return read


def _status(code: int, reason: str, message: str) -> JSONResponse:
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message}
    return JSONResponse({**body, "reason": reason, "code": code}, status_code=code)


_STATUS = {
    "description": "a Kubernetes Status object (kind Status, reason, message, code)",
    "content": {"application/json": {"schema": {"type": "object"}}},
}
VALUE_ERRORS: dict[int | str, dict[str, Any]] = {
    404: {**_STATUS, "description": "the metric is not one this lead serves (a Status naming the ones it does)"},
    503: {**_STATUS, "description": "the instance could not be read now (the HPA keeps its last decision)"},
}


def metrics_router(
    source: Source | None = None,
    clock: Callable[[], datetime.datetime] | None = None,
    source_for: SourceFor | None = None,
) -> APIRouter:
    """The API's routes, answering from ``source`` (this lead) or ``source_for`` (the object asked about)."""
    now = clock or (lambda: datetime.datetime.now(datetime.UTC))
    if source_for is None:
        assert source is not None
        one = source

        def source_for(_kind: str, _namespace: str | None, _name: str) -> Mapping[str, int]:
            return one()

    router = APIRouter(prefix=PREFIX, tags=["custom metrics"])

    @router.get("")
    def resources() -> dict[str, Any]:
        """APIResourceList: the metrics this lead serves."""
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": GROUP_VERSION,
            "resources": [
                {
                    "name": f"*/{name}",
                    "singularName": "",
                    "namespaced": True,
                    "kind": "MetricValueList",
                    "verbs": ["get"],
                }
                for name in METRIC_NAMES
            ],
        }

    def value_list(kind: str, namespace: str | None, name: str, metric: str, api_version: str) -> Any:
        if metric not in METRIC_NAMES:
            return _status(
                404, "NotFound", f"metric {metric!r} is not served here (choose from {', '.join(METRIC_NAMES)})"
            )
        try:
            values = source_for(kind, namespace, name)
        except LookupError as exc:  # no such object (or not one that has a lead)
            return _status(404, "NotFound", str(exc))
        except Exception as exc:  # the instance is down or busy: the HPA keeps its last decision
            return _status(503, "ServiceUnavailable", f"cannot read the instance: {exc}")
        described: dict[str, Any] = {"kind": kind, "name": name, "apiVersion": api_version}
        if namespace is not None:
            described["namespace"] = namespace
        stamp = now().strftime("%Y-%m-%dT%H:%M:%SZ")
        item = {
            "describedObject": described,
            "metric": {"name": metric},
            "timestamp": stamp,
            "value": str(int(values[metric])),
        }
        return {"kind": "MetricValueList", "apiVersion": GROUP_VERSION, "metadata": {}, "items": [item]}

    @router.get("/namespaces/{namespace}/metrics/{metric}", responses=VALUE_ERRORS)
    def namespace_metric(namespace: str, metric: str) -> Any:
        return value_list("Namespace", None, namespace, metric, "v1")

    @router.get("/namespaces/{namespace}/{resource}/{name}/{metric}", responses=VALUE_ERRORS)
    def object_metric(namespace: str, resource: str, name: str, metric: str) -> Any:
        kind, api_version = _kind(resource)
        return value_list(kind, namespace, name, metric, api_version)

    @router.get("/{resource}/{name}/{metric}", responses=VALUE_ERRORS)
    def cluster_metric(resource: str, name: str, metric: str) -> Any:
        kind, api_version = _kind(resource)
        return value_list(kind, None, name, metric, api_version)

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
