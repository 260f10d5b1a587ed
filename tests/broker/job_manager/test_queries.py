"""Queries alone (broker/modules/job_manager/queries.py): list, info, stats, history and annotate, reading a real
table and fake queue and executions, without a broker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from broker.jobs.build import build_jobspec
from broker.jobs.jobspec import parse_jobspec
from broker.jobs.record import JobRecord
from broker.jobs.store import JobStore
from broker.modules.job_manager.queries import Queries
from broker.modules.job_manager.table import JobTable
from broker.modules.job_manager.warmer import ViewWarmer
from broker.modules.scheduler import Scheduler
from broker.protocol import EINVAL
from broker.service import ServiceError
from broker.testing_port import FakePort, fake_request
from tests.broker.job_manager.unused_roles import UnusedExecutions, UnusedQueue


class FakeQueue(UnusedQueue):
    """The queue's pending set, which the test fills."""

    def __init__(self, port: FakePort) -> None:
        self._sched = Scheduler(port, "fcfs")
        self.waiting: set[int] = set()

    @property
    def sched(self) -> Scheduler:
        return self._sched

    def pending(self) -> set[int]:
        return self.waiting


class FakeExecutions(UnusedExecutions):
    """One job running, and nothing else to say."""

    def count(self) -> int:
        return 1


class Parts:
    def __init__(self, tmp_path: Path) -> None:
        self.port = FakePort(hosts=["node0", "node1", "node2"])
        store = JobStore(tmp_path / "state", fsync=False)
        self.table = JobTable(self.port, store, store.restore(now_ms=1_000).epoch_ms, lambda touched: None)
        self.queue = FakeQueue(self.port)
        self.warmer = ViewWarmer(self.port.loop, lambda jobid, kinds: self.queries.render_ahead(jobid, kinds))
        self.queries = Queries(
            lambda: self.port.hostnames,
            self.port.burst_view,
            self.table,
            self.queue,
            FakeExecutions(),
            self.warmer,
        )

    def job(self, userid: int = 1000, urgency: int = 16) -> JobRecord:
        jobspec = build_jobspec(["true"], nnodes=2)
        record = self.table.create(jobspec, parse_jobspec(jobspec), userid, urgency, 0)
        self.table.post(record, "depend")
        self.table.post(record, "priority", {"priority": urgency})
        return record


def test_info_names_the_job_s_nodes_and_tasks(tmp_path: Path) -> None:
    parts = Parts(tmp_path)
    record = parts.job()
    parts.table.post(record, "alloc", {"ranks": [1, 2], "cores": {"1": [0], "2": [0]}})
    info = parts.queries.svc_info(fake_request("job-manager.info", {"id": record.jobid, "jobspec": True})[0])
    assert info["nodelist"] == "node[1-2]" and info["ntasks"] == 2
    assert info.get("jobspec") == record.jobspec


def test_list_orders_pending_by_priority_and_filters_by_user(tmp_path: Path) -> None:
    parts = Parts(tmp_path)
    low, high, other = parts.job(urgency=10), parts.job(urgency=20), parts.job(userid=7)
    req, replies = fake_request("job-manager.list", {"userid": 1000})
    parts.queries.svc_list(req)
    assert [job["id"] for job in replies.payload["jobs"]] == [high.jobid, low.jobid]
    keyed, keyed_replies = fake_request("job-manager.list", {"view": "restful", "keyed": True, "ids": [other.jobid]})
    parts.queries.svc_list(keyed)
    assert list(json.loads(keyed_replies.last.encoded_payload)["jobs"]) == [str(other.jobid)]


def test_a_listed_kind_is_kept_and_rendered_ahead(tmp_path: Path) -> None:
    parts = Parts(tmp_path)
    record = parts.job()
    parts.queries.svc_list(fake_request("job-manager.list", {})[0])
    assert parts.table.views_kept() == {"job-list": 1}
    parts.table.post(record, "annotate", {"user": {"a": 1}})  # drops the kept view
    parts.warmer.touched([record.jobid])
    parts.port.loop.advance(1.0)
    assert parts.table.views_kept() == {"job-list": 1}


def test_an_unknown_view_is_einval(tmp_path: Path) -> None:
    parts = Parts(tmp_path)
    with pytest.raises(ServiceError) as caught:
        parts.queries.svc_list(fake_request("job-manager.list", {"view": "yaml"})[0])
    assert caught.value.errnum == EINVAL and "yaml" in caught.value.message


def test_stats_history_and_annotate(tmp_path: Path) -> None:
    parts = Parts(tmp_path)
    first, second = parts.job(), parts.job()
    parts.queue.waiting = {first.jobid, second.jobid}
    stats = parts.queries.svc_stats(fake_request("job-manager.stats", {})[0])
    assert stats["states"]["sched"] == 2 and stats["queue_length"] == 2 and stats["running"] == 1
    history = parts.queries.svc_history(fake_request("job-manager.history.get", {"userid": 1000, "slice": "[:]"})[0])
    assert history == {"jobs": [second.jobid, first.jobid]}
    parts.queries.svc_annotate(
        fake_request("job-manager.annotate", {"id": first.jobid, "annotations": {"user": {"x": 1}}})[0]
    )
    assert first.extra["user"] == {"x": 1}
