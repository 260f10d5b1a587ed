"""The checkout carries no run output: the PMPI traces an MPI run leaves in its working directory are neither
committed nor picked up by `git add` (issue 24)."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)


def test_no_trace_file_is_committed() -> None:
    listed = _git("ls-files", "--", "pmpi.*.bin", "*/pmpi.*.bin")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split() == []


def test_a_trace_written_at_the_repository_root_is_ignored() -> None:
    for name in ("pmpi.p12345.0.bin", "pmpi.p7.13.bin"):  # "p<pid of rank 0>": no job id was given
        checked = _git("check-ignore", "--no-index", "-q", name)
        assert checked.returncode == 0, f"{name} is not ignored by .gitignore"
