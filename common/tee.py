"""One text stream written to several files: a loop's event log kept in its own directory and, on a local
cluster, in the lead's copy that its /cluster page reads."""

from __future__ import annotations

from pathlib import Path
from typing import IO, Protocol


class TextSink(Protocol):
    """Where a log writes text: an open text file or a Tee."""

    def write(self, text: str, /) -> int: ...

    def flush(self) -> None: ...


class Tee:
    """A write-only text stream appending to each path given (None entries skipped), parents created."""

    def __init__(self, *paths: Path | None) -> None:
        self.paths = [path for path in paths if path is not None]
        self.files: list[IO[str]] = []

    def __enter__(self) -> Tee:
        for path in self.paths:
            path.parent.mkdir(parents=True, exist_ok=True)
            self.files.append(open(path, "a", encoding="utf-8"))
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def write(self, text: str) -> int:
        for handle in self.files:
            handle.write(text)
        return len(text)

    def flush(self) -> None:
        for handle in self.files:
            handle.flush()

    def close(self) -> None:
        for handle in self.files:
            handle.close()
        self.files = []
