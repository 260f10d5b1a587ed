"""JobTable alone (broker/modules/job_manager/table.py): records, eventlogs, the group commit and the store,
against a fake port and a real store in a temporary directory, without a broker."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.jobs.build import build_jobspec
from broker.jobs.jobspec import parse_jobspec
from broker.jobs.states import JobState
from broker.jobs.store import JobStore
from broker.modules.job_manager.table import JobTable
from broker.protocol import ENOENT
from broker.service import ServiceError
from broker.testing_port import FakePort, fake_request

Made = tuple[FakePort, JobTable, list[set[int]]]


@pytest.fixture
def made(tmp_path: Path) -> Made:
    port = FakePort()
    commits: list[set[int]] = []
    store = JobStore(tmp_path / "state", fsync=False)
    table = JobTable(port, store, store.restore(now_ms=1_000).epoch_ms, commits.append)
    return port, table, commits


def _submit(table: JobTable, command: str = "true") -> int:
    jobspec = build_jobspec([command])
    return table.create(jobspec, parse_jobspec(jobspec), userid=1000, urgency=16, flags=0).jobid


def test_a_submit_is_acknowledged_only_after_its_commit_and_the_composer_hears_of_it(made: Made) -> None:
    port, table, commits = made
    jobid = _submit(table)
    req, replies = fake_request("job-manager.submit")
    table.ack_after_commit(req, {"id": jobid})
    assert replies.messages == [] and table.unflushed() == 1
    port.loop.settle()
    assert replies.payload == {"id": jobid}
    assert commits == [{jobid}] and table.unflushed() == 0
    assert [e.name for e in table.eventlog(jobid)] == ["submit"]
    assert table.store.journal.events()  # on disk


def test_events_advance_the_record_and_stay_unflushed_until_the_commit(made: Made) -> None:
    port, table, commits = made
    jobid = _submit(table)
    record = table[jobid]
    table.post(record, "depend")
    table.post(record, "priority", {"priority": 16})
    assert record.state == JobState.SCHED and record.priority == 16
    assert table.unflushed(jobid) == 3 and table.active_count == 1
    port.loop.settle()
    assert table.unflushed(jobid) == 0 and commits[-1] == {jobid}


def test_an_unknown_id_is_enoent(made: Made) -> None:
    _, table, _ = made
    req, _ = fake_request("job-manager.info", {"id": 12345})
    with pytest.raises(ServiceError) as caught:
        table.record(req)
    assert caught.value.errnum == ENOENT and "unknown job id" in caught.value.message


def test_jobs_with_equal_environments_share_one_dict(made: Made) -> None:
    _, table, _ = made
    first, second = build_jobspec(["a"], environment={"A": "1"}), build_jobspec(["b"], environment={"A": "1"})
    table.share_environment(first)
    table.share_environment(second)
    env = lambda spec: spec["attributes"]["system"]["environment"]  # noqa: E731
    assert env(first) is env(second)


def test_retire_and_views_kept_until_the_next_event(made: Made) -> None:
    _, table, _ = made
    jobid = _submit(table)
    record = table[jobid]
    calls: list[int] = []

    def encode(r: object) -> str:
        calls.append(1)
        return "{}"

    table.encoded_view(record, "job-list", encode, keep=True)
    table.encoded_view(record, "job-list", encode, keep=True)
    assert len(calls) == 1 and table.views_kept() == {"job-list": 1}
    table.post(record, "depend")
    assert table.views_kept() == {}
    table.retire(jobid)
    assert table.active_count == 0


def test_recover_rebuilds_every_job_from_its_events(made: Made, tmp_path: Path) -> None:
    port, table, _ = made
    jobid = _submit(table)
    table.post(table[jobid], "depend")
    port.loop.settle()
    table.close()
    store = JobStore(tmp_path / "state", fsync=False)
    saved = store.restore(now_ms=2_000)
    again = JobTable(port, store, saved.epoch_ms, lambda touched: None)
    again.recover(saved.events)
    assert again[jobid].state == JobState.PRIORITY and again.active_count == 1
    assert [e.name for e in again.eventlog(jobid)] == ["submit", "depend"]
    assert _submit(again) > jobid  # ids keep growing after a restart
