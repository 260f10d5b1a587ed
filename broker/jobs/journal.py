"""The job journal: an append-only, fsync'd log of job events on the lead's disk.

A job is written here before its id is returned to the submitter, so a lead restart never loses an accepted
job: replaying the journal rebuilds every job (see record.py). Events use Flux's eventlog names.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.errors import BrokerFailure
from broker.jsontext import dumps, lines
from common import atomic


class JournalError(BrokerFailure):
    """The journal cannot be read or written; names the file and the line."""


@dataclass(frozen=True)
class JobEvent:
    """One job eventlog entry (RFC 21): the job, the event's name, when, and its context."""

    jobid: int
    name: str
    timestamp: float
    context: dict[str, Any] = field(default_factory=dict)  # open: each event name has its own (annotate: anything)

    def to_json(self) -> str:
        return dumps(self._fields())

    def _fields(self) -> object:
        """The journal line's JSON object."""
        return {"id": self.jobid, "name": self.name, "timestamp": self.timestamp, "context": self.context}

    @staticmethod
    def lines(events: Iterable[JobEvent]) -> str:
        """The events as journal lines (each to_json and a newline), encoded in one pass."""
        return lines(event._fields() for event in events)

    @classmethod
    def from_json(cls, text: str) -> JobEvent:
        data = json.loads(text)
        return cls(int(data["id"]), str(data["name"]), float(data["timestamp"]), dict(data.get("context", {})))


class Journal:
    """One file, one event per line. `append` returns only once the line is on stable storage."""

    def __init__(self, path: str | Path, fsync: bool = True) -> None:
        self.path = Path(path)
        self.fsync = fsync
        self._lock = threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._truncate_torn_tail()
        self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - held open for appends

    def _truncate_torn_tail(self) -> None:
        """A crash mid-write can leave a final line without its newline: that event was never acknowledged."""
        if not self.path.exists():
            return
        with open(self.path, "rb+") as handle:
            data = handle.read()
            if data and not data.endswith(b"\n"):
                handle.truncate(data.rfind(b"\n") + 1)

    def append(self, *events: JobEvent) -> None:
        if events:
            self.append_text(JobEvent.lines(events))

    def append_text(self, text: str) -> None:
        """Lines already encoded (JobEvent.to_json, one per line); on stable storage when this returns."""
        with self._lock:
            try:
                self._file.write(text)
                self._file.flush()
                if self.fsync:
                    os.fsync(self._file.fileno())
            except OSError as exc:
                raise JournalError(f"{self.path}: cannot append: {exc.strerror or exc}") from exc

    def events(self) -> Iterator[JobEvent]:
        with open(self.path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    yield JobEvent.from_json(line)
                except (ValueError, KeyError, TypeError) as exc:
                    raise JournalError(f"{self.path}:{number}: corrupt journal entry: {exc}") from exc

    def rewrite(self, events: list[JobEvent]) -> None:
        """Atomically replace the journal (compaction): write aside, fsync, rename, fsync the directory."""
        with self._lock:
            with atomic.replacing(self.path, fsync=True) as temporary:
                with open(temporary, "w", encoding="utf-8") as handle:
                    handle.writelines(event.to_json() + "\n" for event in events)
                self._file.close()
            self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115

    def close(self) -> None:
        with self._lock:
            self._file.close()
