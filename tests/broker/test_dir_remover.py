"""Job directories removed off the broker's loop (broker/modules/dir_remover.py)."""

from __future__ import annotations

import threading
from pathlib import Path

from broker.modules.dir_remover import DirRemover


def test_removes_in_the_background_and_close_waits_for_every_removal(tmp_path: Path) -> None:
    gate = threading.Event()
    removed: list[str] = []

    def slow_removal(path: str) -> None:
        gate.wait(10)
        Path(path).rmdir()
        removed.append(path)

    remover = DirRemover(slow_removal)
    dirs = [tmp_path / str(i) for i in range(5)]
    for d in dirs:
        d.mkdir()
        remover.remove(str(d))  # returns at once, although the removal is held
    assert all(d.exists() for d in dirs)
    gate.set()
    remover.close()
    assert removed == [str(d) for d in dirs] and not any(d.exists() for d in dirs)


def test_one_failing_removal_does_not_stop_the_others(tmp_path: Path) -> None:
    remover = DirRemover(lambda path: Path(path).rmdir())  # raises for a missing or non-empty directory
    full, empty = tmp_path / "full", tmp_path / "empty"
    full.mkdir()
    (full / "file").write_text("x")
    empty.mkdir()
    remover.remove(str(tmp_path / "missing"))
    remover.remove(str(full))
    remover.remove(str(empty))
    remover.close()
    assert full.exists() and not empty.exists()
