"""The custom metrics API (custom.metrics.k8s.io/v1beta2) on the lead: shapes an HPA reads, and values from a
real built-in broker."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import cast

from fastapi import FastAPI
from fastapi.testclient import TestClient

from broker.jobs.api import JobClient
from broker.jobs.shapes import JobStats
from broker.payloads import QueueState, ResourceStatus
from broker.rest.metrics import METRIC_NAMES, broker_source, compute_metrics, metrics_router
from broker.testing import kill_orphans, render_instance

# the answers' fields compute_metrics reads, no more: the up ranks and their cores; the running job's ranks and
# cores, the drained ranks; the jobs by state
RESOURCES = cast(
    ResourceStatus,
    {"up": "0-2", "reports": {"0": {"ncores": 4}, "1": {"ncores": 4}, "2": {"ncores": 4}, "3": {"ncores": 4}}},
)
QUEUE = cast(QueueState, {"running": [{"ranks": [0, 1], "cores": {"0": 4, "1": 2}}], "drained": []})
STATS = cast(JobStats, {"states": {"sched": 3, "run": 1, "inactive": 7}})


def test_values_by_hand() -> None:
    # 3 ranks up of 4 (rank 3 down), 4 cores each: 12 cores up; one job holds 4 + 2 of them on ranks 0 and 1.
    values = compute_metrics(RESOURCES, QUEUE, STATS)
    assert values["node_up_count"] == 3 and values["node_free_count"] == 1
    assert values["node_cores_up_count"] == 12 and values["node_cores_free_count"] == 6
    assert values["job_queue_state_sched_count"] == 3 and values["job_queue_state_new_count"] == 0
    assert set(values) == set(METRIC_NAMES)
    # rank 2 drained (no new jobs): neither it nor its cores are free any more
    drained = compute_metrics(RESOURCES, {**QUEUE, "drained": [2]}, STATS)
    assert drained["node_free_count"] == 0 and drained["node_cores_free_count"] == 2
    assert drained["node_up_count"] == 3 and drained["node_cores_up_count"] == 12


def client() -> TestClient:
    app = FastAPI()
    stamp = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)
    app.include_router(metrics_router(lambda: compute_metrics(RESOURCES, QUEUE, STATS), clock=lambda: stamp))
    return TestClient(app)


def test_object_metric_of_a_minicluster_as_an_hpa_asks() -> None:
    answer = client().get(
        "/apis/custom.metrics.k8s.io/v1beta2/namespaces/hpc/miniclusters.miniclusters.dev/demo/job_queue_state_sched_count"
    )
    assert answer.status_code == 200
    body = answer.json()
    assert body["kind"] == "MetricValueList" and body["apiVersion"] == "custom.metrics.k8s.io/v1beta2"
    (item,) = body["items"]
    assert item["describedObject"] == {
        "kind": "MiniCluster",
        "name": "demo",
        "apiVersion": "miniclusters.dev/v1alpha1",
        "namespace": "hpc",
    }
    assert item["metric"] == {"name": "job_queue_state_sched_count"}
    assert item["value"] == "3" and item["timestamp"] == "2026-01-02T03:04:05Z"


def test_discovery_and_unknown_metric() -> None:
    listing = client().get("/apis/custom.metrics.k8s.io/v1beta2").json()
    assert listing["kind"] == "APIResourceList"
    assert {r["name"] for r in listing["resources"]} == {f"*/{n}" for n in METRIC_NAMES}
    missing = client().get("/apis/custom.metrics.k8s.io/v1beta2/namespaces/hpc/pods/demo-0/gpu_count")
    assert missing.status_code == 404 and missing.json()["reason"] == "NotFound"
    assert "node_up_count" in missing.json()["message"]


def test_broker_values(tmp_path: Path) -> None:
    inst = render_instance(tmp_path, 2)
    try:
        inst.start(0, "-Sbroker.quorum=2", "-Sresource.cores=0-1", "-Sjob-exec.kill-timeout=1s")
        inst.start(1, "-Sresource.cores=0-1")
        inst.handle(0).close()
        with JobClient(inst.uri(0)) as jobs:
            jobid = jobs.submit(command=["sleep", "30"], nnodes=1, ntasks=1)
            jobs.wait_state(jobid, "RUN")
            values = broker_source(inst.uri(0))()
            assert values["node_up_count"] == 2 and values["node_cores_up_count"] == 4
            assert values["node_free_count"] == 1 and values["node_cores_free_count"] == 3
            assert values["job_queue_state_run_count"] == 1
            jobs.cancel(jobid)
    finally:
        inst.cleanup()
        kill_orphans(inst.uri(0))
