"""The job manager's saved state: one owner, one format (JSON lines), one restore path.

A state directory holds
- `journal.jsonl`: every job event (Flux's eventlog names) and the instance's own records, id 0 (job ids are
  FLUIDs, never 0): `epoch` (the millisecond FLUIDs count from, kept across restarts as in Flux) and `queue`
  (started/enabled and their reasons, the queue policy), the last one of each kind winning;
- `output/<id>.jsonl`: an ended job's output, one `[stream, task, text]` per line; `output/<id>.attempt-<n>.jsonl`:
  the output of run n of a job that a save stopped and requeued.

broker/jobs/archive.py packs these files for `minicluster save` and puts them back for a restore.

`restore` is the only reader. A state directory written before this layout (an `epoch` file, `queue.json`,
`output/<id>.json`) is migrated the first time it is restored: the old values are appended to the journal (or
rewritten as JSON lines) before the old files are removed, so a crash half-way loses nothing and no accepted job
is ever lost.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from broker.jobs.journal import JobEvent, Journal
from broker.jsontext import dumps
from common import atomic

INSTANCE = 0
"""The id of the instance's own journal records."""
JOURNAL_FILE = "journal.jsonl"
OUTPUT_DIR = "output"
OLD_EPOCH_FILE = "epoch"
OLD_QUEUE_FILE = "queue.json"


@dataclass(frozen=True)
class QueueState:
    """What `flux queue` changed, which a restarted lead keeps (as Flux does)."""

    started: bool = True
    stop_reason: str = ""
    enabled: bool = True
    enable_reason: str = ""
    policy: str | None = None
    """None: the broker's configured policy."""


@dataclass(frozen=True)
class SavedState:
    """What the job store read back at start: the FLUID epoch, the queue's state and the job events."""

    epoch_ms: int
    queue: QueueState
    events: list[JobEvent] = field(default_factory=list)
    """Job events in the order they were written (replay them with broker.jobs.record.replay)."""


class JobStore:
    """Everything the job manager keeps on disk, in `statedir`."""

    def __init__(self, statedir: Path | str, fsync: bool = True) -> None:
        self.root = Path(statedir)
        self.outdir = self.root / OUTPUT_DIR
        self.outdir.mkdir(parents=True, exist_ok=True)
        self.journal = Journal(self.root / JOURNAL_FILE, fsync=fsync)

    # ------------------------------------------------------------------ restore (the one reader)
    def restore(self, now_ms: int) -> SavedState:
        """The saved state; a fresh directory gets its epoch (`now_ms`) recorded before anything else."""
        self._migrate()
        epoch: int | None = None
        queue = QueueState()
        events: list[JobEvent] = []
        for event in self.journal.events():
            if event.jobid != INSTANCE:
                events.append(event)
            elif event.name == "epoch":
                epoch = int(event.context["ms"])
            elif event.name == "queue":
                queue = QueueState(**{k: v for k, v in event.context.items() if k in QueueState.__dataclass_fields__})
        if epoch is None:
            epoch = now_ms
            self.journal.append(JobEvent(INSTANCE, "epoch", now_ms / 1000, {"ms": now_ms}))
        return SavedState(epoch, queue, events)

    def _migrate(self) -> None:
        """Fold the files of the layout before this one into the journal and JSON lines, then remove them."""
        old_epoch = self.root / OLD_EPOCH_FILE
        if old_epoch.exists():
            with contextlib.suppress(ValueError):
                ms = int(old_epoch.read_text().strip())
                self.journal.append(JobEvent(INSTANCE, "epoch", ms / 1000, {"ms": ms}))
            old_epoch.unlink()
        old_queue = self.root / OLD_QUEUE_FILE
        if old_queue.exists():
            with contextlib.suppress(ValueError, TypeError):
                data = json.loads(old_queue.read_text())
                state = QueueState(
                    started=bool(data.get("started", True)),
                    stop_reason=str(data.get("stop_reason", "")),
                    enabled=bool(data.get("enabled", True)),
                    enable_reason=str(data.get("enable_reason", "")),
                    policy=str(data["policy"]) if data.get("policy") else None,
                )
                self.save_queue(state, timestamp=0.0)
            old_queue.unlink()
        for old in self.outdir.glob("*.json"):
            try:
                lines = json.loads(old.read_text())
            except ValueError:
                continue  # unreadable: leave it for a person to look at
            self._write_lines(self.outdir / f"{old.stem}.jsonl", lines)
            old.unlink()

    # ------------------------------------------------------------------ writers
    def append(self, *events: JobEvent) -> None:
        """Job events, on stable storage when this returns (group commit: pass a whole batch)."""
        self.journal.append(*events)

    def save_queue(self, state: QueueState, timestamp: float) -> None:
        self.journal.append(JobEvent(INSTANCE, "queue", timestamp, asdict(state)))

    def save_output(self, jobid: int, lines: list[list[Any]]) -> None:
        self._write_lines(self.outdir / f"{jobid}.jsonl", lines)

    def save_attempt_output(self, jobid: int, attempt: int, lines: list[list[Any]]) -> None:
        """The output of a run that was stopped and requeued (a save): kept apart, the next run starts afresh."""
        self._write_lines(self.outdir / f"{jobid}.attempt-{attempt}.jsonl", lines)

    def load_output(self, jobid: int) -> list[list[Any]] | None:
        """An ended job's output, None when none was saved."""
        try:
            with open(self.outdir / f"{jobid}.jsonl", encoding="utf-8") as handle:
                return [json.loads(line) for line in handle if line.strip()]
        except FileNotFoundError:
            return None

    @staticmethod
    def _write_lines(path: Path, lines: list[list[Any]]) -> None:
        atomic.write_text(path, "".join(dumps(line) + "\n" for line in lines))

    def close(self) -> None:
        self.journal.close()
