"""JobOutputs alone: lines kept while a job runs and for the last OUTPUT_CACHE inactive jobs, read back from disk
after; --output files written as lines arrive, a file that cannot be opened failing the job; a requeued attempt's
lines saved apart."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.jobs.build import build_jobspec
from broker.jobs.jobspec import parse_jobspec
from broker.jobs.record import JobRecord
from broker.jobs.states import JobState
from broker.jobs.store import JobStore
from broker.modules.job_manager import outputs
from broker.modules.job_manager.outputs import JobOutputs
from broker.modules.job_manager.table import JobTable
from broker.testing_port import FakePort
from tests.broker.job_manager.unused_roles import UnusedWatches


class Watches(UnusedWatches):
    def __init__(self) -> None:
        self.notified: list[int] = []

    def notify_output(self, jobid: int) -> None:
        self.notified.append(jobid)


class Parts:
    def __init__(self, tmp_path: Path) -> None:
        store = JobStore(tmp_path / "state", fsync=False)
        self.table = JobTable(FakePort(hosts=["node0"]), store, store.restore(now_ms=1_000).epoch_ms, lambda _: None)
        self.watches = Watches()
        self.raised: list[tuple[int, str, str, int]] = []
        self.outputs = JobOutputs(self.table, self.watches, self._raise)

    def _raise(self, record: JobRecord, kind: str, note: str, severity: int = 0) -> None:
        self.raised.append((record.jobid, kind, note, severity))

    def job(self, output: str | None = None) -> JobRecord:
        options = {"output": {"stdout": {"path": output}}} if output else None
        jobspec = build_jobspec(["hostname"], shell_options=options)
        record = self.table.create(jobspec, parse_jobspec(jobspec), 1000, 16, 0)
        for name in ("depend", "priority", "alloc", "start"):
            self.table.post(record, name, {"priority": 16} if name == "priority" else {})
        return record

    def end(self, record: JobRecord) -> None:
        for name in ("finish", "release", "clean"):
            self.table.post(record, name, {"status": 0} if name == "finish" else {})
        self.table.retire(record.jobid)
        self.outputs.save(record.jobid)


def test_lines_stay_in_memory_for_the_newest_inactive_jobs_and_come_back_from_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(outputs, "OUTPUT_CACHE", 2)
    parts = Parts(tmp_path)
    records = [parts.job() for _ in range(3)]
    for i, record in enumerate(records):
        parts.outputs.add(record.jobid, [["stdout", 0, f"job {i}\n"]])
    assert parts.watches.notified == [r.jobid for r in records]
    for record in records:
        parts.end(record)
    assert all(r.state == JobState.INACTIVE for r in records)
    assert list(parts.outputs._lines) == [r.jobid for r in records[1:]]  # the oldest left memory
    for i, record in enumerate(records):  # and every job's lines read back the same
        assert parts.outputs.lines(record.jobid) == [["stdout", 0, f"job {i}\n"]]


def test_output_files_are_written_as_lines_arrive_and_one_that_cannot_open_fails_the_job(tmp_path: Path) -> None:
    parts = Parts(tmp_path)
    good = parts.job(output=str(tmp_path / "out.{{id}}"))
    parts.outputs.open_files(good)
    parts.outputs.add(good.jobid, [["stdout", 0, "hello\n"]])
    (written,) = tmp_path.glob("out.*")
    assert written.read_text() == "hello\n"  # flushed before the job ends
    bad = parts.job(output=str(tmp_path / "missing" / "out"))
    parts.outputs.open_files(bad)
    assert parts.raised and parts.raised[0][:2] == (bad.jobid, "exec") and "cannot open" in parts.raised[0][2]
    parts.outputs.add(bad.jobid, [["stdout", 0, "kept\n"]])
    assert parts.outputs.lines(bad.jobid) == [["stdout", 0, "kept\n"]]  # kept for `flux job attach`
    assert len(parts.raised) == 1  # said once


def test_a_requeued_attempt_keeps_its_lines_apart_and_the_next_starts_empty(tmp_path: Path) -> None:
    parts = Parts(tmp_path)
    record = parts.job()
    parts.outputs.add(record.jobid, [["stdout", 0, "first try\n"]])
    parts.outputs.save_attempt(record)
    assert parts.outputs.lines(record.jobid) == []
    (saved,) = (tmp_path / "state").rglob(f"{record.jobid}.attempt-0.jsonl")
    assert "first try" in saved.read_text()
    parts.outputs.add(record.jobid, [["stdout", 0, "second try\n"]])
    assert parts.outputs.lines(record.jobid) == [["stdout", 0, "second try\n"]]
