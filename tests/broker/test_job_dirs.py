"""Job directories (broker/modules/job_dirs.py): an empty one, as it was made, is kept for the next job; anything
else is removed as before, and nothing is left when the broker closes."""

from __future__ import annotations

import shutil
from pathlib import Path

from broker.modules.job_dirs import JobDirs


def removal(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)


def test_an_empty_job_directory_becomes_the_next_job_s(tmp_path: Path) -> None:
    dirs = JobDirs(str(tmp_path), removal)
    first, second = tmp_path / "1", tmp_path / "2"
    dirs.make(str(first))
    made = first.stat().st_ino
    dirs.release(str(first), 0)
    assert not first.exists() and len(dirs.spares()) == 1
    dirs.make(str(second))
    assert second.stat().st_ino == made and dirs.spares() == []  # renamed into place, not made again
    dirs.close()


def test_a_directory_a_job_wrote_in_or_changed_is_removed_not_kept(tmp_path: Path) -> None:
    dirs = JobDirs(str(tmp_path), removal)
    wrote, changed = tmp_path / "1", tmp_path / "2"
    dirs.make(str(wrote))
    dirs.make(str(changed))
    (wrote / "left-behind").write_text("x")
    changed.chmod(0o777)
    dirs.release(str(wrote), 0)
    dirs.release(str(changed), 0)
    assert dirs.spares() == []
    dirs.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_spares_are_bounded_and_removed_at_close(tmp_path: Path) -> None:
    dirs = JobDirs(str(tmp_path), removal, spares=2)
    for name in "abc":
        dirs.make(str(tmp_path / name))
    for name in "abc":
        dirs.release(str(tmp_path / name), 0)
    assert len(dirs.spares()) == 2
    dirs.close()
    assert list(tmp_path.iterdir()) == []


def test_a_job_directory_already_there_is_kept_as_it_is(tmp_path: Path) -> None:
    dirs = JobDirs(str(tmp_path), removal)
    dirs.make(str(tmp_path / "1"))
    dirs.release(str(tmp_path / "1"), 0)
    there = tmp_path / "2"
    there.mkdir()
    (there / "file").write_text("kept")
    dirs.make(str(there))
    assert (there / "file").read_text() == "kept"
    dirs.close()
    assert [p.name for p in tmp_path.iterdir()] == ["2"]
