"""Watches alone (broker/modules/job_manager/watches.py): deferred replies to waits, output and eventlog watches,
annotation and queue-idle waits, against a real table and fake queue, executions and queries, without a broker."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from broker.jobs import submit_flags
from broker.jobs.build import build_jobspec
from broker.jobs.jobid import encode_f58
from broker.jobs.jobspec import parse_jobspec
from broker.jobs.record import JobRecord
from broker.jobs.shapes import JobInfoRecord
from broker.jobs.store import JobStore
from broker.modules.job_manager.table import JobTable
from broker.modules.job_manager.watches import Watches
from broker.protocol import ECHILD, EHOSTUNREACH, EINVAL, ENOENT, Message
from broker.service import ServiceError
from broker.testing_port import FakePort, fake_request
from tests.broker.job_manager.unused_roles import UnusedExecutions, UnusedQueue


class FakeQueue(UnusedQueue):
    def pending(self) -> set[int]:
        return set()


class FakeExecutions(UnusedExecutions):
    def __init__(self) -> None:
        self.output: dict[int, list[list[Any]]] = {}
        self.active = 0

    def lines(self, jobid: int) -> list[list[Any]]:
        return self.output.get(jobid, [])

    def count(self) -> int:
        return self.active


class FakeQueries:
    def info(self, record: JobRecord) -> JobInfoRecord:
        return {"id": record.jobid, "state": str(record.state.name)}


class Parts:
    def __init__(self, tmp_path: Path) -> None:
        self.port = FakePort()
        store = JobStore(tmp_path / "state", fsync=False)
        self.table = JobTable(self.port, store, store.restore(now_ms=1_000).epoch_ms, self._committed)
        self.executions = FakeExecutions()
        self.watches = Watches(self.table, FakeQueue())
        self.watches.wire(self.executions, FakeQueries())

    def _committed(self, touched: set[int]) -> None:
        self.watches.committed(touched)
        self.watches.check_idle()

    def job(self, flags: int = 0) -> JobRecord:
        jobspec = build_jobspec(["true"])
        record = self.table.create(jobspec, parse_jobspec(jobspec), 1000, 16, flags)
        self.watches.submitted(record)
        return record

    def end(self, record: JobRecord) -> None:
        for name in ("depend", "exception", "clean"):
            self.table.post(record, name, {"type": "cancel", "severity": 0} if name == "exception" else {})
        self.table.retire(record.jobid)
        self.watches.job_ended(record)
        self.watches.annotations_ended(record)
        self.port.loop.settle()


def test_a_wait_is_answered_when_the_job_ends_and_an_ended_job_at_once(tmp_path: Path) -> None:
    parts = Parts(tmp_path)
    record = parts.job()
    req, replies = fake_request("job-manager.wait", {"id": record.jobid})
    parts.watches.svc_wait(req)
    assert replies.messages == []
    parts.end(record)
    assert replies.payload == {"id": record.jobid, "state": "INACTIVE"}
    again, more = fake_request("job-manager.wait", {"id": record.jobid})
    parts.watches.svc_wait(again)
    assert more.payload["state"] == "INACTIVE"


def test_wait_any_takes_a_waitable_job_s_end_once_and_beyond_them_is_echild(tmp_path: Path) -> None:
    parts = Parts(tmp_path)
    record = parts.job(flags=submit_flags.WAITABLE)
    parts.end(record)  # a zombie until someone waits
    first, taken = fake_request("job-manager.wait", {"id": submit_flags.JOBID_ANY})
    parts.watches.svc_wait(first)
    assert taken.payload["id"] == record.jobid
    second, refused = fake_request("job-manager.wait", {"id": submit_flags.JOBID_ANY})
    parts.watches.svc_wait(second)
    assert refused.last.errnum == ECHILD


def test_waits_through_a_lost_rank_are_answered_with_an_error_and_a_gone_client_s_dropped(tmp_path: Path) -> None:
    parts = Parts(tmp_path)
    record = parts.job()
    far, far_replies = fake_request("job-manager.wait", {"id": record.jobid}, route=("c:02", "r:1"))
    gone, gone_replies = fake_request("job-manager.wait", {"id": record.jobid}, route=("c:03",))
    parts.watches.svc_wait(far)
    parts.watches.svc_wait(gone)
    parts.watches.on_membership(Message("event", "membership.update", {"ranks": {"1": "lost"}}))
    assert far_replies.last.errnum == EHOSTUNREACH
    parts.watches.client_gone(("c:03",))
    parts.end(record)
    assert gone_replies.messages == []


def finish(parts: Parts, record: JobRecord, status: int) -> None:
    for name, context in (("alloc", {}), ("start", {}), ("finish", {"status": status}), ("clean", {})):
        parts.table.post(record, name, context)
    parts.table.retire(record.jobid)
    parts.watches.job_ended(record)
    parts.port.loop.settle()


def test_wait_all_answers_once_when_every_job_it_names_has_ended_in_the_order_asked(tmp_path: Path) -> None:
    parts = Parts(tmp_path)
    first, second, third = parts.job(), parts.job(flags=submit_flags.WAITABLE), parts.job()
    finish(parts, first, 0)
    req, replies = fake_request("job-manager.wait-all", {"ids": [third.jobid, first.jobid, second.jobid]})
    parts.watches.svc_wait_all(req)
    finish(parts, third, 3 << 8)
    assert replies.messages == []
    parts.end(second)  # canceled
    assert replies.payload == {
        "jobs": [
            {"id": third.jobid, "returncode": 3, "success": False},
            {"id": first.jobid, "returncode": 0, "success": True},
            {"id": second.jobid, "returncode": None, "success": False},
        ]
    }
    assert len(replies.messages) == 1
    taker, taken = fake_request("job-manager.wait", {"id": submit_flags.JOBID_ANY})
    parts.watches.svc_wait(taker)
    assert taken.payload["id"] == second.jobid  # a waitable job's end is left for `flux job wait`
    done, at_once = fake_request("job-manager.wait-all", {"ids": [first.jobid]})
    parts.watches.svc_wait_all(done)
    assert at_once.payload == {"jobs": [{"id": first.jobid, "returncode": 0, "success": True}]}


def test_wait_all_refuses_unknown_ids_and_what_is_not_a_list_of_ids(tmp_path: Path) -> None:
    parts = Parts(tmp_path)
    record = parts.job()
    unknown, _ = fake_request("job-manager.wait-all", {"ids": [record.jobid, 12345]})
    with pytest.raises(ServiceError) as refused:
        parts.watches.svc_wait_all(unknown)
    assert refused.value.errnum == ENOENT and encode_f58(12345) in str(refused.value)
    for ids in (["x"], [True], "1,2"):
        bad, _ = fake_request("job-manager.wait-all", {"ids": ids})
        with pytest.raises(ServiceError) as wrong:
            parts.watches.svc_wait_all(bad)
        assert wrong.value.errnum == EINVAL and "ids" in str(wrong.value)


def test_a_gone_client_s_wait_all_is_dropped_and_one_through_a_lost_rank_is_told(tmp_path: Path) -> None:
    parts = Parts(tmp_path)
    first, second = parts.job(), parts.job()
    gone, gone_replies = fake_request("job-manager.wait-all", {"ids": [first.jobid, second.jobid]}, route=("c:03",))
    far, far_replies = fake_request("job-manager.wait-all", {"ids": [second.jobid]}, route=("c:02", "r:1"))
    parts.watches.svc_wait_all(gone)
    parts.watches.svc_wait_all(far)
    parts.watches.client_gone(("c:03",))
    parts.watches.on_membership(Message("event", "membership.update", {"ranks": {"1": "lost"}}))
    assert far_replies.last.errnum == EHOSTUNREACH and len(far_replies.messages) == 1
    finish(parts, first, 0)
    finish(parts, second, 0)
    assert gone_replies.messages == [] and len(far_replies.messages) == 1


def test_an_eventlog_watch_gets_events_once_they_are_on_disk(tmp_path: Path) -> None:
    parts = Parts(tmp_path)
    record = parts.job()
    req, replies = fake_request("job-manager.eventlog", {"id": record.jobid, "wait": True})
    parts.watches.svc_eventlog(req)
    assert replies.messages == []  # the submit event is not flushed yet
    parts.table.schedule_flush()
    parts.port.loop.settle()
    assert [e["name"] for e in replies.payload["events"]] == ["submit"] and replies.payload["offset"] == 1


def test_an_output_watch_waits_for_lines_and_eof(tmp_path: Path) -> None:
    parts = Parts(tmp_path)
    record = parts.job()
    req, replies = fake_request("job-manager.output", {"id": record.jobid, "wait": True})
    parts.watches.svc_output(req)
    assert replies.messages == []
    parts.executions.output[record.jobid] = [["stdout", 0, "hi\n"]]
    parts.watches.notify_output(record.jobid)
    assert replies.payload == {"lines": [["stdout", 0, "hi\n"]], "offset": 1, "eof": False}


def test_annotation_and_idle_waits(tmp_path: Path) -> None:
    parts = Parts(tmp_path)
    record = parts.job()
    req, replies = fake_request("job-manager.annotation-wait", {"id": record.jobid, "key": "user"})
    parts.watches.svc_annotation_wait(req)
    parts.executions.active = 1
    idle, idle_replies = fake_request("job-manager.queue-idle", {})
    parts.watches.svc_queue_idle(idle)
    parts.table.post(record, "annotate", {"user": {"note": "x"}})
    parts.port.loop.settle()
    assert replies.payload["annotations"]["user"] == {"note": "x"}
    assert idle_replies.messages == []
    parts.executions.active = 0
    parts.table.schedule_flush()
    parts.port.loop.settle()
    assert idle_replies.payload == {"pending": 0, "running": 0}
