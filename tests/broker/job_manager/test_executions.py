"""Executions alone (broker/modules/job_manager/executions.py): starting a job on its ranks, its output, its end,
exceptions and kills, lost ranks, against a fake port (the RPCs to job-exec are answered by hand), a real table and
fake queue, watches and saver, without a broker."""

from __future__ import annotations

import signal
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from broker.jobs.build import build_jobspec
from broker.jobs.jobspec import parse_jobspec
from broker.jobs.record import JobRecord
from broker.jobs.states import JobState
from broker.jobs.store import JobStore
from broker.modules.exec_request import ExecRequest, LocalExecStart
from broker.modules.job_manager.executions import KILLED, Executions
from broker.modules.job_manager.table import JobTable
from broker.protocol import EHOSTUNREACH, EINVAL, Message
from broker.service import ServiceError
from broker.testing_port import FakePort, fake_request
from tests.broker.job_manager.unused_roles import UnusedQueue, UnusedWatches


class FakeQueue(UnusedQueue):
    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []
        self.noted: set[int] = set()

    def take_drain_note(self, jobid: int) -> bool:
        self.noted.discard(jobid)
        return False

    def mark_dirty(self) -> None:
        self.calls.append(("dirty", 0))

    def kick(self) -> None:
        self.calls.append(("kick", 0))

    def schedule_soon(self) -> None:
        self.calls.append(("soon", 0))

    def enqueue(self, jobid: int) -> None:
        self.calls.append(("enqueue", jobid))

    def dequeue(self, jobid: int) -> None:
        self.calls.append(("dequeue", jobid))


class FakeWatches(UnusedWatches):
    def __init__(self) -> None:
        self.ended: list[int] = []
        self.output: list[int] = []

    def notify_output(self, jobid: int) -> None:
        self.output.append(jobid)

    def job_ended(self, record: JobRecord) -> None:
        self.ended.append(record.jobid)

    def annotations_ended(self, record: JobRecord) -> None:
        pass


class FakeSaver:
    def __init__(self) -> None:
        self.checkpointing: set[int] = set()

    def checkpointed(self, record: JobRecord) -> bool:
        return record.jobid in self.checkpointing


class Parts:
    def __init__(self, tmp_path: Path) -> None:
        self.port = FakePort(hosts=["node0", "node1", "node2"])
        store = JobStore(tmp_path / "state", fsync=False)
        self.table = JobTable(self.port, store, store.restore(now_ms=1_000).epoch_ms, lambda touched: None)
        self.queue, self.watches, self.saver = FakeQueue(), FakeWatches(), FakeSaver()
        self.ex = Executions(self.port, self.table, self.queue, self.watches, self.saver)

    def job(self, nnodes: int = 1, system_attributes: dict[str, object] | None = None) -> JobRecord:
        jobspec = build_jobspec(["hostname"], nnodes=nnodes, system_attributes=system_attributes)
        record = self.table.create(jobspec, parse_jobspec(jobspec), 1000, 16, 0)
        self.table.post(record, "depend")
        self.table.post(record, "priority", {"priority": 16})
        return record

    def run(self, record: JobRecord, ranks: list[int]) -> None:
        self.ex.start(record, {rank: [0] for rank in ranks})
        for rpc in self.port.sent_to("job-exec.start"):
            rpc.answer({"rank": rpc.nodeid, "ntasks": 1})

    def done(self, record: JobRecord, rank: int, status: int = 0, lines: list[list[object]] | None = None) -> None:
        payload = {"id": record.jobid, "gen": 0, "rank": rank, "status": status, "lines": lines or []}
        self.ex.svc_exec_done(fake_request("job-manager.exec-done", payload, route=(f"r:{rank}",))[0])


def state_of(record: JobRecord) -> JobState:
    """The record's state read afresh (a reply moved it since the last assert, which the type checker cannot see)."""
    return record.state


def test_a_job_starts_on_each_of_its_ranks_and_finishes_when_all_report(tmp_path: Path) -> None:
    parts = Parts(tmp_path)
    record = parts.job(nnodes=2)
    parts.run(record, [1, 2])
    starts = parts.port.sent_to("job-exec.start")
    assert sorted(rpc.nodeid for rpc in starts) == [1, 2]
    assert starts[0].payload["id"] == record.jobid
    assert record.state == JobState.RUN and parts.ex.running() == [record.jobid]
    parts.done(record, 1, lines=[["stdout", 0, "node1\n"]])
    assert record.state == JobState.RUN and parts.ex.lines(record.jobid) == [["stdout", 0, "node1\n"]]
    parts.done(record, 2)
    assert state_of(record) == JobState.INACTIVE and parts.ex.count() == 0
    assert [e.name for e in parts.table.eventlog(record.jobid)][-4:] == ["start", "finish", "release", "clean"]
    assert parts.watches.ended == [record.jobid]
    assert ("soon", 0) in parts.queue.calls  # its cores are free for the next job at once


def test_a_failed_rank_kills_the_job_everywhere_with_the_worst_status(tmp_path: Path) -> None:
    parts = Parts(tmp_path)
    record = parts.job(nnodes=2)
    parts.run(record, [1, 2])
    parts.done(record, 1, status=1 << 8)
    kills = parts.port.sent_to("job-exec.kill")
    assert sorted(k.nodeid for k in kills) == [1, 2] and kills[0].payload["signal"] == signal.SIGTERM
    parts.done(record, 2, status=KILLED)
    assert record.state == JobState.INACTIVE
    assert parts.table.eventlog(record.jobid)[-3].context == {"status": 1 << 8}


def test_an_exec_failure_raises_an_exception_and_ends_the_job(tmp_path: Path) -> None:
    parts = Parts(tmp_path)
    record = parts.job()
    parts.ex.start(record, {1: [0]})
    parts.port.sent_to("job-exec.start")[0].answer(errnum=EINVAL, errstr="no such command")
    exceptions = [e for e in parts.table.eventlog(record.jobid) if e.name == "exception"]
    assert exceptions and "node1" in exceptions[0].context["note"] and exceptions[0].context["type"] == "exec"


def test_cancel_of_a_pending_job_cleans_it_up_and_of_an_inactive_one_is_einval(tmp_path: Path) -> None:
    parts = Parts(tmp_path)
    record = parts.job()
    parts.ex.svc_cancel(fake_request("job-manager.cancel", {"id": record.jobid})[0])
    assert record.state == JobState.INACTIVE and ("dequeue", record.jobid) in parts.queue.calls
    assert parts.port.sent_to("job-exec.kill") == []
    with pytest.raises(ServiceError) as caught:
        parts.ex.svc_cancel(fake_request("job-manager.cancel", {"id": record.jobid})[0])
    assert caught.value.errnum == EINVAL


def test_an_unreachable_rank_counts_as_killed_so_cancel_always_ends_the_job(tmp_path: Path) -> None:
    parts = Parts(tmp_path)
    record = parts.job()
    parts.run(record, [1])
    parts.ex.svc_cancel(fake_request("job-manager.cancel", {"id": record.jobid})[0])
    kill = parts.port.sent_to("job-exec.kill")[0]
    assert kill.timeout is not None
    kill.answer(errnum=EHOSTUNREACH, errstr="rank 1 is down")
    assert record.state == JobState.INACTIVE


def test_a_lost_rank_fails_its_job_or_requeues_one_that_asked(tmp_path: Path) -> None:
    parts = Parts(tmp_path)
    failing, requeued = parts.job(), parts.job(system_attributes={"requeue": True})
    parts.run(failing, [1])
    parts.run(requeued, [2])
    parts.ex.on_membership(Message("event", "membership.update", {"ranks": {"1": "lost", "2": "lost"}}))
    assert failing.state == JobState.INACTIVE
    assert requeued.state == JobState.SCHED and ("enqueue", requeued.jobid) in parts.queue.calls
    assert any(e.context.get("type") == "node-failure" for e in parts.table.eventlog(failing.jobid))


def test_a_checkpointing_job_is_left_to_the_saver(tmp_path: Path) -> None:
    parts = Parts(tmp_path)
    record = parts.job()
    parts.run(record, [1])
    parts.saver.checkpointing.add(record.jobid)
    parts.done(record, 1)
    assert record.state == JobState.RUN  # the saver requeues it instead of its finishing


def test_a_start_on_the_job_manager_s_own_rank_hands_job_exec_the_typed_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rank 0 is the job manager's own broker: job-exec there gets the ExecRequest itself (LocalExecStart), with
    that rank's tasks; other ranks get the JSON form, which reads back as the same request with theirs."""
    parts = Parts(tmp_path)
    payloads: dict[int, object] = {}
    send = parts.port.rpc

    def recording(topic: str, payload: Any, nodeid: int, callback: Any, timeout: float | None = None) -> int:
        payloads[nodeid] = payload  # as sent, before FakePort keeps its plain copy
        return send(topic, payload, nodeid, callback, timeout)

    monkeypatch.setattr(parts.port, "rpc", recording)
    record = parts.job(nnodes=2)
    parts.ex.start(record, {0: [0], 1: [0]})
    local, remote = payloads[0], payloads[1]
    assert isinstance(local, LocalExecStart) and not isinstance(remote, LocalExecStart)
    assert local.request.tasks == (0,) and local.request.jobid == record.jobid and local.request.ranks == (0, 1)
    assert dict(local) == {"id": record.jobid, "gen": 0, "tasks": [0]}
    assert isinstance(remote, dict)
    remote_request = ExecRequest.from_payload(remote)
    assert remote_request.tasks == (1,) and remote_request == replace(local.request, tasks=(1,))


def test_a_local_exec_start_reads_back_as_the_very_request_it_carries() -> None:
    request = ExecRequest(
        jobid=7, gen=2, tasks=(0,), command=("true",), userid=0, launch="tasks", size=1, ranks=(0,),
        hosts=(("node0", 1),), cores={0: (0,)},
    )  # fmt: skip
    payload = LocalExecStart(request)
    assert ExecRequest.from_payload(payload) is request
    assert dict(payload) == {"id": 7, "gen": 2, "tasks": [0]}
