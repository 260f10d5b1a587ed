"""Saver alone (broker/modules/job_manager/saver.py): `minicluster save`'s service (refusals, the queue stopped,
running jobs settled by policy, the archive written once nothing runs) against a fake port, a real table and store,
and fake queue and executions, without a broker."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from broker.jobs.build import build_jobspec
from broker.jobs.jobspec import parse_jobspec
from broker.jobs.record import JobRecord
from broker.jobs.store import JobStore
from broker.modules.job_manager.saver import SAVING, Saver
from broker.modules.job_manager.table import JobTable
from broker.options import BrokerError
from broker.protocol import EINVAL, ENOENT
from broker.service import ServiceError
from broker.testing_port import FakePort, fake_request
from tests.broker.job_manager.unused_roles import UnusedExecutions, UnusedQueue


class FakeQueue(UnusedQueue):
    def __init__(self) -> None:
        self.stopped_for = ""
        self.kicks = 0

    def stop(self, reason: str) -> None:
        self.stopped_for = reason

    def resume(self) -> None:
        self.stopped_for = ""

    def kick(self) -> None:
        self.kicks += 1

    def interrupted_by(self, reason: str) -> bool:
        return reason == self.stopped_for


class FakeExecutions(UnusedExecutions):
    def __init__(self) -> None:
        self.jobs: list[int] = []
        self.requeued: list[tuple[int, str, str]] = []

    def running(self) -> list[int]:
        return list(self.jobs)

    def count(self) -> int:
        return len(self.jobs)

    def is_running(self, jobid: int) -> bool:
        return jobid in self.jobs

    def requeue(self, record: JobRecord, kind: str, note: str) -> None:
        self.jobs.remove(record.jobid)
        self.requeued.append((record.jobid, kind, note))


class Parts:
    def __init__(self, tmp_path: Path, **attrs: str) -> None:
        self.port = FakePort()
        for name, value in attrs.items():
            self.port.attrs.set(name, value)
        statedir = tmp_path / "state"
        self.saver = Saver(self.port, statedir, self.port.on_online)
        store = JobStore(statedir, fsync=False)
        self.table = JobTable(
            self.port, store, store.restore(now_ms=1_000).epoch_ms, lambda touched: self.saver.check()
        )
        self.queue, self.executions = FakeQueue(), FakeExecutions()
        self.saver.wire(self.table, self.queue, self.executions)

    def running_job(self, save: str | None = None) -> JobRecord:
        system = {"save-policy": save} if save else None
        jobspec = build_jobspec(["sleep", "60"], system_attributes=system)
        record = self.table.create(jobspec, parse_jobspec(jobspec), 1000, 16, 0)
        self.executions.jobs.append(record.jobid)
        return record


@pytest.mark.parametrize(
    ("path", "force", "errnum"),
    [("relative.tar", False, EINVAL), ("/no/such/dir/q.tar", False, ENOENT), ("EXISTS", False, errno.EEXIST)],
)
def test_a_save_is_refused_where_it_cannot_write(tmp_path: Path, path: str, force: bool, errnum: int) -> None:
    parts = Parts(tmp_path)
    if path == "EXISTS":
        path = str(tmp_path / "there.tar")
        Path(path).write_text("")
    with pytest.raises(ServiceError) as caught:
        parts.saver.svc_save(fake_request("job-manager.save", {"path": path, "force": force})[0])
    assert caught.value.errnum == errnum
    assert parts.queue.stopped_for == ""  # nothing was stopped for a refused save


def test_a_save_stops_the_queue_and_answers_once_the_archive_is_written(tmp_path: Path) -> None:
    parts = Parts(tmp_path)
    target = tmp_path / "queue.tar"
    req, replies = fake_request("job-manager.save", {"path": str(target)})
    parts.saver.svc_save(req)
    assert parts.queue.stopped_for == SAVING
    with pytest.raises(ServiceError) as busy:
        parts.saver.svc_save(fake_request("job-manager.save", {"path": str(tmp_path / "other.tar")})[0])
    assert busy.value.errnum == 16  # EBUSY: one save at a time
    parts.port.loop.settle()
    assert replies.payload["path"] == str(target) and target.exists()


def test_running_jobs_are_requeued_by_a_save_and_the_archive_waits_for_them(tmp_path: Path) -> None:
    parts = Parts(tmp_path)
    record = parts.running_job(save="requeue")
    req, replies = fake_request("job-manager.save", {"path": str(tmp_path / "q.tar")})
    parts.saver.svc_save(req)
    assert parts.executions.requeued == [(record.jobid, "save", "requeued by a save of the queue")]
    parts.port.loop.settle()
    assert replies.payload["path"].endswith("q.tar")


def test_a_job_still_running_at_the_deadline_is_requeued(tmp_path: Path) -> None:
    parts = Parts(tmp_path)
    record = parts.running_job(save="finish")
    req, replies = fake_request("job-manager.save", {"path": str(tmp_path / "q.tar"), "timeout": 30.0})
    parts.saver.svc_save(req)
    parts.port.loop.settle()
    assert replies.messages == [] and parts.executions.requeued == []  # it may finish by itself meanwhile
    parts.port.loop.advance(31.0)
    assert parts.executions.requeued[0][0] == record.jobid and "timed out" in parts.executions.requeued[0][2]
    assert replies.payload["path"].endswith("q.tar")


def test_checkpointed_is_false_for_a_job_no_save_signalled(tmp_path: Path) -> None:
    parts = Parts(tmp_path)
    assert parts.saver.checkpointed(parts.running_job()) is False


def test_a_misspelt_restore_unfit_refuses_to_start(tmp_path: Path) -> None:
    with pytest.raises(BrokerError, match="restore-unfit"):
        Parts(tmp_path, **{"job-manager.restore-unfit": "maybe"})


def test_a_queue_a_save_stopped_runs_again_after_a_restart(tmp_path: Path) -> None:
    parts = Parts(tmp_path)
    parts.queue.stop(SAVING)
    parts.saver.started()
    assert parts.queue.stopped_for == ""
