"""JobQueue alone (broker/modules/job_manager/queue.py): submission, the scheduling pass, `flux queue`, urgency and
drains, against a fake port, a real table and fake executions and watches, without a broker."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from broker.jobs.build import build_jobspec
from broker.jobs.record import JobRecord
from broker.jobs.states import JobState
from broker.jobs.store import JobStore, QueueState
from broker.modules.job_manager.queue import ACTIVE_LIMIT, EAGAIN, JobQueue
from broker.modules.job_manager.roles import Allocation, Holding
from broker.modules.job_manager.table import JobTable
from broker.protocol import EINVAL, EPERM
from broker.service import ServiceError
from broker.testing_port import FakePort, fake_request
from tests.broker.job_manager.unused_roles import UnusedExecutions, UnusedWatches


class FakeExecutions(UnusedExecutions):
    """Records the jobs started; holds their allocations as running."""

    def __init__(self) -> None:
        self.started: dict[int, Allocation] = {}

    def holding(self) -> list[Holding]:
        return [(jobid, alloc, 0.0, 0.0) for jobid, alloc in self.started.items()]

    def start(self, record: JobRecord, allocation: Allocation) -> None:
        self.started[record.jobid] = allocation

    def count(self) -> int:
        return len(self.started)

    def running(self) -> list[int]:
        return list(self.started)


class FakeWatches(UnusedWatches):
    def __init__(self) -> None:
        self.submitted_ids: list[int] = []

    def submitted(self, record: JobRecord) -> None:
        self.submitted_ids.append(record.jobid)


class Parts:
    def __init__(self, tmp_path: Path, saved: QueueState | None = None, **attrs: Any) -> None:
        self.port = FakePort()
        for name, value in attrs.items():
            self.port.attrs.set(name.replace("_", "-").replace("--", "."), value)
        store = JobStore(tmp_path / "state", fsync=False)
        self.commits: list[set[int]] = []
        self.table = JobTable(self.port, store, store.restore(now_ms=1_000).epoch_ms, self._committed)
        self.queue = JobQueue(self.port, self.port, lambda: self.port.online, self.table, saved or QueueState())
        self.executions, self.watches = FakeExecutions(), FakeWatches()
        self.queue.wire(self.executions, self.watches)

    def _committed(self, touched: set[int]) -> None:
        self.commits.append(touched)
        self.queue.committed(touched)

    def submit(self, ntasks: int = 1, urgency: int = 16) -> int:
        req, replies = fake_request(
            "job-manager.submit", {"jobspec": build_jobspec(["true"], ntasks=ntasks), "urgency": urgency}
        )
        self.queue.svc_submit(req)
        self.port.loop.settle()
        return int(replies.payload["id"])


def test_a_submit_is_journaled_queued_and_started_where_it_fits(tmp_path: Path) -> None:
    parts = Parts(tmp_path)
    jobid = parts.submit(ntasks=2)
    record = parts.table[jobid]
    assert [e.name for e in parts.table.eventlog(jobid)] == ["submit", "depend", "priority"]
    assert parts.watches.submitted_ids == [jobid]
    assert parts.executions.started == {jobid: {0: [0, 1]}}  # the scheduling pass after the commit started it
    assert jobid not in parts.queue.pending() and record.priority == 16


def test_a_job_s_end_starts_the_next_at_once_but_a_submission_not_on_disk_waits_for_its_commit(tmp_path: Path) -> None:
    parts = Parts(tmp_path)
    first = parts.submit(ntasks=4)  # all of the two nodes' cores
    second = parts.submit(ntasks=4)
    assert set(parts.executions.started) == {first} and second in parts.queue.pending()
    commits = len(parts.commits)
    del parts.executions.started[first]  # it ended: its cores are free
    parts.queue.schedule_soon()
    parts.port.loop.settle()
    assert set(parts.executions.started) == {second} and len(parts.commits) == commits  # no commit waited for
    del parts.executions.started[second]
    req, replies = fake_request("job-manager.submit", {"jobspec": build_jobspec(["true"])})
    parts.queue.svc_submit(req)
    parts.queue.schedule()
    assert parts.executions.started == {} and replies.messages == []  # its submit is not on disk yet
    parts.port.loop.settle()
    assert set(parts.executions.started) == {replies.payload["id"]}  # the commit's pass started it


def test_nothing_starts_before_the_instance_is_online_and_a_held_job_never(tmp_path: Path) -> None:
    parts = Parts(tmp_path)
    parts.port.quorum_reached = False
    waiting = parts.submit()
    held = parts.submit(urgency=0)
    assert parts.executions.started == {} and set(parts.queue.pending()) == {waiting, held}
    parts.port.quorum_reached = True
    parts.queue.kick()
    parts.port.loop.settle()
    assert set(parts.executions.started) == {waiting}


def test_a_disabled_queue_refuses_submissions_and_a_stopped_one_keeps_them(tmp_path: Path) -> None:
    parts = Parts(tmp_path)
    req, _ = fake_request("job-manager.queue", {"action": "disable", "reason": "maintenance"})
    assert parts.queue.svc_queue(req)["enabled"] is False
    with pytest.raises(ServiceError) as caught:
        parts.submit()
    assert caught.value.errnum == EPERM and "maintenance" in caught.value.message
    parts.queue.svc_queue(fake_request("job-manager.queue", {"action": "enable"})[0])
    parts.queue.svc_queue(fake_request("job-manager.queue", {"action": "stop", "reason": "hold on"})[0])
    jobid = parts.submit()
    assert parts.executions.started == {} and jobid in parts.queue.pending()
    assert parts.queue.interrupted_by("hold on")
    status = parts.queue.svc_queue(fake_request("job-manager.queue", {"action": "start"})[0])
    parts.port.loop.settle()
    assert status["started"] is True and jobid in parts.executions.started


def test_the_active_limit_refuses_with_eagain(tmp_path: Path) -> None:
    parts = Parts(tmp_path)
    parts.port.attrs.set(ACTIVE_LIMIT, 1)
    limited = JobQueue(parts.port, parts.port, lambda: False, parts.table, QueueState())
    limited.wire(parts.executions, parts.watches)
    parts.submit()
    req, _ = fake_request("job-manager.submit", {"jobspec": build_jobspec(["true"])})
    with pytest.raises(ServiceError) as caught:
        limited.svc_submit(req)
    assert caught.value.errnum == EAGAIN and ACTIVE_LIMIT in caught.value.message


def test_bad_submissions_are_einval(tmp_path: Path) -> None:
    parts = Parts(tmp_path)
    for payload in ({"jobspec": build_jobspec(["true"]), "urgency": 32}, {"jobspec": {"version": 9}}):
        with pytest.raises(ServiceError) as caught:
            parts.queue.svc_submit(fake_request("job-manager.submit", payload)[0])
        assert caught.value.errnum == EINVAL


def test_urgency_reorders_and_is_refused_once_running(tmp_path: Path) -> None:
    parts = Parts(tmp_path)
    parts.port.quorum_reached = False
    first, second = parts.submit(), parts.submit()
    answer = parts.queue.svc_urgency(fake_request("job-manager.urgency", {"id": second, "urgency": 31})[0])
    assert answer == {"old_urgency": 16} and parts.table[second].priority == 2**32 - 1
    parts.port.quorum_reached = True
    parts.queue.schedule()
    assert next(iter(parts.executions.started)) == second  # the expedited job starts first
    assert parts.table[first].state == JobState.SCHED


def test_drains_keep_jobs_off_a_rank_and_are_kept_by_the_queue(tmp_path: Path) -> None:
    parts = Parts(tmp_path)
    assert parts.queue.drain("exact", [1], "repair") == frozenset({1})
    jobid = parts.submit(ntasks=4)  # needs both nodes' cores: waits while rank 1 is drained
    assert parts.executions.started == {} and jobid in parts.queue.pending()
    reason = parts.table[jobid].extra["sched"]["reason_pending"]
    assert reason.startswith("waiting for drained ranks") and "repair" in reason
    assert parts.queue.drain("undrain", [1], "") == frozenset()
    parts.port.loop.settle()
    assert jobid in parts.executions.started
    assert parts.queue.take_drain_note(jobid)  # the note given, for Executions.start to take back
    assert not parts.queue.take_drain_note(jobid)


def test_a_stopped_queue_is_saved_and_comes_back_stopped(tmp_path: Path) -> None:
    parts = Parts(tmp_path)
    parts.queue.stop("saving the queue")
    parts.port.loop.settle()
    parts.table.close()
    saved = JobStore(tmp_path / "state", fsync=False).restore(now_ms=2_000).queue
    assert saved.started is False and saved.stop_reason == "saving the queue"
    again = Parts(tmp_path, saved)
    assert again.queue.interrupted_by("saving the queue")
