"""`up --restore` on real local pods when the lead reads what this machine's check did not see (an archive
replaced after the check, or one only the lead can read): the lead refuses it for good (exit 78, never
restarted), `up` fails at once with the lead's reason (exit 2) instead of waiting for its timeout, tears the
cluster down, and nothing is written outside the state directory. And `up --restore` onto a cluster that exists
is refused before the archive is read."""

from __future__ import annotations

import gzip
import subprocess
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from broker.jobs.archive import read_archive
from broker.testing import pack_archive
from miniclusters.backends.local.state import StateStore
from miniclusters.cli import main, queue_archive

pytestmark = pytest.mark.needs_root
Run = Callable[..., subprocess.CompletedProcess[str]]


@pytest.mark.parametrize("case", ["hostile", "damaged"])
def test_a_lead_that_refuses_the_archive_fails_up_at_once_with_its_reason(
    machine: Any, spec_writer: Callable[..., Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    escaped = tmp_path / "escaped.jsonl"
    member = "output/" + "../" * 40 + str(escaped).lstrip("/")  # from the lead's state directory to this test's
    archive = pack_archive(tmp_path / "queue.tar.gz", [(member, tarfile.REGTYPE, b"owned\n", "")])
    if case == "damaged":
        archive.write_bytes(gzip.compress(gzip.decompress(archive.read_bytes())[:700]))
    # This machine's check passes (it read a sound archive): only the lead sees what it restores.
    sound = read_archive(pack_archive(tmp_path / "sound.tar.gz", []))
    monkeypatch.setattr(queue_archive, "read_archive", lambda *_args, **_kwargs: sound)
    spec = spec_writer(tmp_path, "refuse", size=2, interactive=True)  # an interactive lead restarts on failures
    before = sorted(tmp_path.rglob("*"))
    # --timeout 600: the lead's exit must be seen at once (not its restarts, not the timeout, past pytest's own)
    result = CliRunner().invoke(main, ["up", str(spec), "--detach", "--restore", str(archive), "--timeout", "600"])
    machine.remember()
    assert result.exit_code == 2, result.output
    lead = f"MiniCluster 'refuse': pod refuse-0 (index 0) refused to start: content.restore: {archive}: "
    assert lead in result.output, result.output
    if case == "hostile":
        assert f"archive member {member!r} climbs out of its directory" in result.output
    else:
        assert "truncated" in result.output
    assert "MiniCluster refuse was torn down" in result.output
    assert not escaped.exists() and sorted(tmp_path.rglob("*")) == before
    assert StateStore(machine.state_dir).names() == []


def test_restore_onto_an_existing_cluster_is_refused_before_the_archive_is_read(
    mc: Run, spec_writer: Callable[..., Path], tmp_path: Path
) -> None:
    spec = spec_writer(tmp_path, "busy", size=1, max_size=1, interactive=True)
    up = mc("up", str(spec), "--detach")
    assert up.returncode == 0, up.stderr
    try:
        missing = tmp_path / "never-written.tar.gz"  # reading it would say "no such file"
        refused = mc("up", str(spec), "--detach", "--restore", str(missing))
        assert refused.returncode == 2, refused.stderr
        assert "--restore: MiniCluster 'busy' already exists: a queue is restored into a new cluster only" in (
            refused.stderr
        )
        assert "no such file" not in refused.stderr
        assert mc("status", "busy").returncode == 0  # untouched
    finally:
        assert mc("down", "busy").returncode == 0
