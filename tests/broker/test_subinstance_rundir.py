"""A sub-instance's run directory nests in its parent job's tmpdir; two levels down its socket path passes Linux's
107-byte limit (pytest-xdist's longer temporary paths made `flux batch` inside `flux batch` fail). Then the
child runs in a short directory, linked from the job's tmpdir, and the job's clean-up removes it, depth first."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from broker.modules.subinstance import SOCKET_PATH_MAX, child_rundir, remove_child_rundir


@pytest.fixture
def short_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    place = tmp_path / "t"
    place.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(place))
    return place


def _long_tmpdir(jobtmp: Path) -> Path:
    """A job's tmpdir (`<rundir>/jobtmp/<jobid>`) named long enough to push its child's socket past the limit."""
    path = jobtmp / ("9" * 110)
    path.mkdir(parents=True)
    return path


def test_a_short_enough_path_nests_in_the_job_tmpdir(tmp_path: Path, short_tmp: Path) -> None:
    rundir = child_rundir(str(tmp_path))
    assert rundir == str(tmp_path / "instance") and not list(short_tmp.iterdir())


def test_a_path_past_the_socket_limit_runs_in_a_short_linked_directory(tmp_path: Path, short_tmp: Path) -> None:
    tmpdir = _long_tmpdir(tmp_path)
    assert len(str(tmpdir / "instance" / "local")) > SOCKET_PATH_MAX
    rundir = child_rundir(str(tmpdir))
    assert Path(rundir).parent == short_tmp and len(os.path.join(rundir, "local")) <= SOCKET_PATH_MAX
    assert os.readlink(tmpdir / "instance") == rundir
    assert child_rundir(str(tmpdir)) == rundir  # a restarted broker finds the same one


def test_clean_up_removes_short_directories_at_every_level(tmp_path: Path, short_tmp: Path) -> None:
    """Level 1 nested in the job's tmpdir, its job's level 2 in a short directory, whose job's level 3 too."""
    level1 = tmp_path / "job" / "instance"
    (level1 / "jobtmp").mkdir(parents=True)
    level2_job = _long_tmpdir(level1 / "jobtmp")
    level2 = Path(child_rundir(str(level2_job)))
    level3_job = _long_tmpdir(level2 / "jobtmp")
    level3 = Path(child_rundir(str(level3_job)))
    (level3 / "state").mkdir()
    remove_child_rundir(str(tmp_path / "job"))
    assert not level2.exists() and not level3.exists() and not list(short_tmp.iterdir())
    assert level1.is_dir()  # the job's own tmpdir is job-exec's to remove
