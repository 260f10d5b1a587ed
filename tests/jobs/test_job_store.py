"""The job manager's saved state: one owner, one format, one restore path; an old state directory is migrated
without losing a job, its output, the queue's state or the FLUID epoch."""

from __future__ import annotations

import json
from pathlib import Path

from broker.jobs.journal import JobEvent, Journal
from broker.jobs.record import replay
from broker.jobs.store import INSTANCE, JobStore, QueueState

JOBSPEC = {
    "version": 1,
    "resources": [{"type": "slot", "count": 1, "with": [{"type": "core", "count": 1}]}],
    "tasks": [{"command": ["true"], "slot": "task", "count": {"per_slot": 1}}],
    "attributes": {"system": {}},
}


def _old_layout(statedir: Path) -> None:
    """A state directory as the job manager wrote it before the store: four formats."""
    journal = Journal(statedir / "journal.jsonl")
    journal.append(JobEvent(7, "submit", 1.0, {"jobspec": JOBSPEC, "userid": 0, "urgency": 16}))
    journal.append(JobEvent(7, "depend", 1.1), JobEvent(7, "priority", 1.2, {"priority": 16}))
    journal.append(JobEvent(9, "submit", 2.0, {"jobspec": JOBSPEC, "userid": 0, "urgency": 16}))
    journal.close()
    (statedir / "epoch").write_text("1700000000000\n")
    (statedir / "queue.json").write_text(
        json.dumps(
            {"started": False, "stop_reason": "maintenance", "enabled": True, "enable_reason": "", "policy": "easy"}
        )
    )
    (statedir / "output").mkdir()
    (statedir / "output" / "7.json").write_text(json.dumps([["stdout", 0, "hello\n"]]))


def test_an_old_state_directory_is_migrated_into_one_format(tmp_path: Path) -> None:
    _old_layout(tmp_path)
    store = JobStore(tmp_path)
    saved = store.restore(now_ms=1)
    assert saved.epoch_ms == 1700000000000  # not the new start time: ids keep increasing
    assert saved.queue == QueueState(False, "maintenance", True, "", "easy")
    assert set(replay(saved.events)) == {7, 9}  # no accepted job lost
    assert store.load_output(7) == [["stdout", 0, "hello\n"]] and store.load_output(9) is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["journal.jsonl", "output"]
    assert [p.name for p in (tmp_path / "output").iterdir()] == ["7.jsonl"]
    store.close()

    again = JobStore(tmp_path)  # a second restore reads the same state from the one format
    second = again.restore(now_ms=2)
    assert (second.epoch_ms, second.queue, len(second.events)) == (saved.epoch_ms, saved.queue, len(saved.events))
    again.close()


def test_a_fresh_directory_records_its_epoch_first_and_the_last_queue_state_wins(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    assert store.restore(now_ms=42).epoch_ms == 42
    store.save_queue(QueueState(started=False, stop_reason="a"), 1.0)
    store.save_queue(QueueState(enabled=False, enable_reason="b"), 2.0)
    store.close()
    lines = [json.loads(line) for line in (tmp_path / "journal.jsonl").read_text().splitlines()]
    assert [(r["id"], r["name"]) for r in lines] == [(INSTANCE, "epoch"), (INSTANCE, "queue"), (INSTANCE, "queue")]
    saved = JobStore(tmp_path).restore(now_ms=99)
    assert saved.epoch_ms == 42 and saved.queue == QueueState(enabled=False, enable_reason="b") and not saved.events
