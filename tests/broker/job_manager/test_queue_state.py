"""The queue-state service alone (broker/modules/job_manager/queue_state.py): what autoscalers read, and drains
through the queue (JobQueue.drain), against a fake port, a real table and queue and fake executions."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from broker.jobs.build import build_jobspec
from broker.jobs.record import JobRecord
from broker.jobs.store import JobStore, QueueState
from broker.modules.job_manager.queue import JobQueue
from broker.modules.job_manager.queue_state import QueueStateService, node_need
from broker.modules.job_manager.roles import Allocation, Holding
from broker.modules.job_manager.table import JobTable
from broker.protocol import EINVAL
from broker.service import ServiceError
from broker.testing_port import FakePort, fake_request
from tests.broker.job_manager.unused_roles import UnusedExecutions, UnusedWatches


class FakeExecutions(UnusedExecutions):
    def __init__(self) -> None:
        self.started: dict[int, Allocation] = {}

    def holding(self) -> list[Holding]:
        return [(jobid, alloc, 0.0, 0.0) for jobid, alloc in self.started.items()]

    def start(self, record: JobRecord, allocation: Allocation) -> None:
        self.started[record.jobid] = allocation

    def running(self) -> list[int]:
        return list(self.started)


class FakeWatches(UnusedWatches):
    def submitted(self, record: JobRecord) -> None:
        pass


Parts = tuple[FakePort, JobTable, JobQueue, FakeExecutions]


@pytest.fixture
def parts(tmp_path: Path) -> Parts:
    port = FakePort(hosts=["node0", "node1", "node2"])
    store = JobStore(tmp_path / "state", fsync=False)
    table = JobTable(port, store, store.restore(now_ms=1_000).epoch_ms, lambda touched: queue.committed(touched))
    queue = JobQueue(port, port, lambda: port.online, table, QueueState())
    executions = FakeExecutions()
    queue.wire(executions, FakeWatches())
    QueueStateService(port, table, queue, executions)
    return port, table, queue, executions


def _call(port: FakePort, topic: str, payload: Mapping[str, object]) -> dict[str, Any]:  # open: as the Handler answers
    handler = port.services[topic]
    result = handler(fake_request(topic, dict(payload))[0])
    assert result is not None
    return dict(result)


def test_node_need_counts_nodes_or_cores_over_the_largest_node() -> None:
    assert node_need(3, 1, 4) == 3 and node_need(None, 9, 4) == 3 and node_need(None, 1, 0) == 1


def test_queue_state_lists_running_and_pending_jobs_in_priority_order(parts: Parts) -> None:
    port, _, queue, executions = parts
    for ntasks in (2, 6, 6):
        req, _ = fake_request("job-manager.submit", {"jobspec": build_jobspec(["true"], ntasks=ntasks)})
        queue.svc_submit(req)
    port.loop.settle()
    state = _call(port, "job-manager.queue-state", {})
    assert [job["id"] for job in state["running"]] == list(executions.started)
    assert len(executions.started) == 1  # 2 cores of 6: one job fits, the two 6-task jobs need 3 nodes each
    assert [job["nnodes"] for job in state["pending"]] == [3, 3]
    assert state["drained"] == [] and state["drain"] == {}


def test_drain_is_refused_for_the_lead_and_unknown_ranks_and_kept_with_its_reason(parts: Parts) -> None:
    port, _, queue, _ = parts
    for payload in ({"ranks": [0]}, {"ranks": [7]}, {"ranks": ["1"]}, {"ranks": [1], "mode": "sideways"}):
        with pytest.raises(ServiceError) as caught:
            _call(port, "job-manager.drain", payload)
        assert caught.value.errnum == EINVAL
    assert _call(port, "job-manager.drain", {"ranks": [2], "reason": "scale down"}) == {"drained": [2], "busy": []}
    assert queue.sched.drains.as_json()["2"]["reason"] == "scale down"
    assert _call(port, "job-manager.queue-state", {})["drained"] == [2]
