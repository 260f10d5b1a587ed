"""The JSON-lines event log every loop writes: its decisions and the world's answers, one object per line.

The CLI turns the log into status lines, a summary table and a timeline PNG, so every record carries the time
(the loop's clock), the loop that wrote it, the cluster and a `kind` word; the rest is free-form JSON.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, TypedDict, cast

from common.tee import TextSink


class EventRecord(TypedDict):
    """The fields every record has; each kind adds its own beside them (the line holds both)."""

    time: float
    loop: str
    cluster: str
    kind: str


class EventLog:
    """Append-only JSON lines to a file or an open text stream; one line per `write`, flushed at once.

    Thread-safe, so a loop and its watchers may share one log. Values that are not JSON (enums, paths) are
    written as strings.
    """

    def __init__(self, target: Path | str | TextSink, loop: str, clock: Callable[[], float]) -> None:
        self.loop = loop
        self.clock = clock
        self._lock = threading.Lock()
        self.path: Path | None = None
        """The file, when the log is one (a resumed runner replays it)."""
        if isinstance(target, Path | str):
            path = Path(target)
            path.parent.mkdir(parents=True, exist_ok=True)
            self.path = path
            self._owned: IO[str] | None = open(path, "a", encoding="utf-8")  # noqa: SIM115 (closed in close())
            self._stream: TextSink = self._owned
            if _torn(path):  # a writer killed mid-line: our first record must not join its half line
                self._stream.write("\n")
        else:
            self._stream = target
            self._owned = None

    def write(self, kind: str, cluster: str = "", **fields: Any) -> EventRecord:
        """Record one event now (by the loop's clock); returns the record written (the kind's fields included)."""
        record = cast(
            EventRecord, {"time": self.clock(), "loop": self.loop, "cluster": cluster, "kind": kind, **fields}
        )
        line = json.dumps(record, default=str, sort_keys=False)
        with self._lock:
            self._stream.write(line + "\n")
            self._stream.flush()
        return record

    def close(self) -> None:
        if self._owned is not None:
            self._owned.close()

    def __enter__(self) -> EventLog:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def _torn(path: Path) -> bool:
    """The file does not end with a newline (and is not empty)."""
    with open(path, "rb") as handle:
        handle.seek(0, 2)
        if handle.tell() == 0:
            return False
        handle.seek(-1, 2)
        return handle.read(1) != b"\n"


def read_events(path: Path | str) -> Iterator[dict[str, Any]]:  # open: as EventLog.write's records
    """The records of a log in order; a torn last line (a writer killed mid-write) is skipped."""
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            line = line.strip()
            if not line:
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict):
                yield record
