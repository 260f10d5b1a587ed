"""The restart path alone (broker/modules/job_manager/restart.py): every job rebuilt from saved events and what a
lead restart interrupted settled, against a real table (and its store) and fake queue, executions and watches."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.jobs.build import build_jobspec
from broker.jobs.jobspec import parse_jobspec
from broker.jobs.journal import JobEvent
from broker.jobs.record import JobRecord
from broker.jobs.states import JobState
from broker.jobs.store import JobStore
from broker.modules.job_manager.executions import KILLED
from broker.modules.job_manager.restart import LOST_NOTE, recover
from broker.modules.job_manager.table import JobTable
from broker.testing_port import FakePort
from tests.broker.job_manager.unused_roles import UnusedExecutions, UnusedQueue, UnusedWatches


class FakeQueue(UnusedQueue):
    def __init__(self) -> None:
        self.queued: list[int] = []

    def enqueue(self, jobid: int) -> None:
        self.queued.append(jobid)


class FakeExecutions(UnusedExecutions):
    def __init__(self, table: JobTable) -> None:
        self.table = table
        self.orphans: list[int] = []
        self.released: list[int] = []

    def adopt_orphan(self, jobid: int) -> None:
        self.orphans.append(jobid)

    def release(self, record: JobRecord) -> None:
        self.released.append(record.jobid)
        self.table.post(record, "release", {"ranks": list(record.ranks), "final": True})
        self.table.post(record, "clean")


class FakeWatches(UnusedWatches):
    def __init__(self) -> None:
        self.seen: list[int] = []

    def submitted(self, record: JobRecord) -> None:
        self.seen.append(record.jobid)


def saved_events(tmp_path: Path, system: dict[str, object] | None = None) -> tuple[list[JobEvent], dict[str, int]]:
    """A journal with one job in each state the restart settles: sched, run and cleanup."""
    port = FakePort()
    store = JobStore(tmp_path / "state", fsync=False)
    table = JobTable(port, store, store.restore(now_ms=1_000).epoch_ms, lambda touched: None)
    ids: dict[str, int] = {}
    for name in ("sched", "run", "cleanup"):
        jobspec = build_jobspec(["true"], system_attributes=system)
        record = table.create(jobspec, parse_jobspec(jobspec), 1000, 16, 0)
        table.post(record, "depend")
        table.post(record, "priority", {"priority": 16})
        if name != "sched":
            table.post(record, "alloc", {"ranks": [1], "cores": {"1": [0]}})
            table.post(record, "start")
        if name == "cleanup":
            table.post(record, "finish", {"status": 0})
        ids[name] = record.jobid
    port.loop.settle()
    table.close()
    return JobStore(tmp_path / "state", fsync=False).restore(now_ms=2_000).events, ids


def restart(tmp_path: Path, events: list[JobEvent], policy: str) -> tuple[JobTable, FakeQueue, FakeExecutions]:
    port = FakePort()
    store = JobStore(tmp_path / "again", fsync=False)
    table = JobTable(port, store, 1_000, lambda touched: None)
    queue, executions, watches = FakeQueue(), FakeExecutions(table), FakeWatches()
    recover(table, queue, executions, watches, events, policy)
    assert sorted(watches.seen) == sorted(table)  # every job was active when the lead stopped: watched again
    return table, queue, executions


def test_fail_policy_fails_running_jobs_and_requeues_pending_ones(tmp_path: Path) -> None:
    events, ids = saved_events(tmp_path)
    table, queue, executions = restart(tmp_path, events, "fail")
    assert queue.queued == [ids["sched"]]
    run = table[ids["run"]]
    assert executions.orphans == [ids["run"]]  # its tasks are killed on any rank that comes back
    exception = next(e for e in table.eventlog(ids["run"]) if e.name == "exception")
    assert exception.context == {"type": "exec", "severity": 0, "note": LOST_NOTE}
    assert next(e for e in table.eventlog(ids["run"]) if e.name == "finish").context == {"status": KILLED}
    assert run.state == JobState.INACTIVE and table[ids["cleanup"]].state == JobState.INACTIVE
    assert sorted(executions.released) == sorted([ids["run"], ids["cleanup"]])


@pytest.mark.parametrize("how", ["policy", "job"])
def test_requeue_policy_or_a_job_asking_puts_running_jobs_back_in_the_queue(tmp_path: Path, how: str) -> None:
    events, ids = saved_events(tmp_path, {"requeue": True} if how == "job" else None)
    table, queue, _ = restart(tmp_path, events, "requeue" if how == "policy" else "fail")
    assert sorted(queue.queued) == sorted([ids["sched"], ids["run"]])
    assert table[ids["run"]].state == JobState.SCHED
    assert [e.name for e in table.eventlog(ids["run"])][-2:] == ["exception", "requeue"]
