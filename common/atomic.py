"""Files written whole or not at all: write beside the target, then rename over it, so a reader (or a restart
after a crash) sees the old file or the new one, never half of one.

The one helper for this in the repository (the job store and journal, the queue archive, the local backend's
state, the loops' state files, the burst state); `fsync=True` also makes the new file and its directory entry
durable before returning (the journal and the archive need that; status files do not).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def _temporary(target: Path) -> Path:
    """Beside the target (same filesystem, so the rename is atomic), hidden, and unique per process and thread."""
    return target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")


def fsync_directory(directory: Path) -> None:
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


@contextlib.contextmanager
def replacing(target: Path | str, *, fsync: bool = False) -> Iterator[Path]:
    """A temporary path for the caller to write (or to have a program write); when the block ends normally it
    replaces `target`, and when it raises it is removed and the target is left as it was."""
    path = Path(target)
    temporary = _temporary(path)
    try:
        yield temporary
        if fsync:
            descriptor = os.open(temporary, os.O_RDONLY)
            try:
                os.fsync(descriptor)
            finally:
                os.close(descriptor)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    if fsync:
        fsync_directory(path.parent)


def write_bytes(target: Path | str, data: bytes, *, fsync: bool = False, mode: int = 0o666) -> None:
    """Replace `target` with `data`; a new file gets `mode` (less the umask): 0o600 for private files."""
    with replacing(target, fsync=fsync) as temporary:
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)


def write_text(target: Path | str, text: str, *, fsync: bool = False, mode: int = 0o666) -> None:
    write_bytes(target, text.encode("utf-8"), fsync=fsync, mode=mode)


def write_json(
    target: Path | str, value: Any, *, indent: int | None = 2, fsync: bool = False, mode: int = 0o666, **dumps: Any
) -> None:
    write_text(target, json.dumps(value, indent=indent, **dumps), fsync=fsync, mode=mode)
