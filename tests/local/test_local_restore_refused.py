"""`minicluster up --restore` refuses a foreign, damaged or hostile archive, or a flavour that cannot read it, with
exit code 2 and before anything is created (no pods, no state); `minicluster save` names an unknown cluster or a
missing directory before any queue stops."""

from __future__ import annotations

import resource
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from broker.jobs.archive import Source, write_archive
from broker.jobs.journal import JobEvent
from broker.jobs.store import JobStore
from broker.testing import pack_archive
from miniclusters.cli import main

MINICLUSTER = str(Path(sys.executable).parent / "minicluster")


def _archive(tmp_path: Path, cluster: str) -> Path:
    store = JobStore(tmp_path / "old", fsync=False)
    store.restore(now_ms=5)
    store.append(JobEvent(7, "submit", 1.0, {"jobspec": {"version": 1}, "userid": 0, "urgency": 16}))
    path = tmp_path / f"{cluster}.tar.gz"
    write_archive(store, path, Source(cluster, [f"{cluster}-0"], 1))
    store.close()
    return path


def _spec(tmp_path: Path, flavour: str = "builtin") -> Path:
    data = {
        "apiVersion": "miniclusters.dev/v1alpha1",
        "kind": "MiniCluster",
        "metadata": {"name": "target"},
        "spec": {"size": 1, "interactive": True, "flux": {"flavour": flavour}, "containers": [{"image": "local"}]},
    }
    path = tmp_path / f"target-{flavour}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("foreign", "saved from MiniCluster 'other', not 'target'"),
        ("damaged", "sha256 does not match the manifest"),
        ("flux", "the queue archive of `minicluster save` needs spec.flux.flavour: builtin"),
    ],
)
def test_refused_before_anything_is_created(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str, message: str
) -> None:
    state = tmp_path / "state"
    monkeypatch.setenv("MINICLUSTERS_STATE_DIR", str(state))
    monkeypatch.delenv("MINICLUSTER_BACKEND", raising=False)
    archive = _archive(tmp_path, "other" if case == "foreign" else "target")
    if case == "damaged":
        import gzip

        raw = bytearray(gzip.decompress(archive.read_bytes()))
        at = raw.index(b'"submit"')
        raw[at + 1 : at + 7] = b"SUBMIT"  # one word of the journal changed, the manifest's checksum kept
        archive.write_bytes(gzip.compress(bytes(raw)))
    spec = _spec(tmp_path, "flux" if case == "flux" else "builtin")
    result = CliRunner().invoke(main, ["up", str(spec), "--detach", "--restore", str(archive)])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert not (state / "target").exists()  # no cluster state written


def test_save_keeps_an_existing_archive_unless_forced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MINICLUSTERS_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("MINICLUSTER_BACKEND", raising=False)
    earlier = tmp_path / "queue.tar.gz"
    earlier.write_text("an earlier save")
    kept = CliRunner().invoke(main, ["save", "target", str(earlier)])
    assert kept.exit_code == 2 and "exists: choose another path, or replace it with --force" in kept.output
    assert earlier.read_text() == "an earlier save"
    forced = CliRunner().invoke(main, ["save", "target", str(earlier), "--force"])
    assert forced.exit_code == 1 and "not found" in forced.output  # past the check: there is no such cluster


def test_save_of_an_unknown_cluster_says_so_before_stopping_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MINICLUSTERS_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("MINICLUSTER_BACKEND", raising=False)
    result = CliRunner().invoke(main, ["save", "nosuch", str(tmp_path / "queue.tar.gz")])
    assert result.exit_code == 1, result.output
    assert "MiniCluster 'nosuch' not found" in result.output
    assert "queue stopped" not in result.output and "saving" not in result.output


def test_save_into_a_missing_directory_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MINICLUSTERS_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("MINICLUSTER_BACKEND", raising=False)
    missing = tmp_path / "no" / "such"
    result = CliRunner().invoke(main, ["save", "target", str(missing / "queue.tar.gz")])
    assert result.exit_code == 2, result.output
    assert f"ARCHIVE: {missing / 'queue.tar.gz'}: directory {missing} does not exist: create it first" in result.output
    assert not (tmp_path / "no").exists()


def test_up_restore_of_a_hostile_archive_exits_2_at_once_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As a user runs it (`minicluster up ... --restore ARCHIVE`, a process of its own): a member climbing out
    of the state directory to a path of this test is named, exit 2, within 5 s, and nothing is written."""
    state = tmp_path / "state"
    monkeypatch.setenv("MINICLUSTERS_STATE_DIR", str(state))
    monkeypatch.delenv("MINICLUSTER_BACKEND", raising=False)
    escaped = tmp_path / "escaped.jsonl"
    member = "output/" + "../" * 40 + str(escaped).lstrip("/")
    archive = pack_archive(tmp_path / "hostile.tar.gz", [(member, tarfile.REGTYPE, b"owned\n", "")])
    spec = _spec(tmp_path)
    before = sorted(tmp_path.rglob("*"))
    cpu = _children_cpu()
    result = subprocess.run(
        [MINICLUSTER, "up", str(spec), "--detach", "--restore", str(archive)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    cpu = _children_cpu() - cpu
    assert result.returncode == 2, result.stderr
    assert f"--restore: {archive}: archive member {member!r} climbs out of its directory" in result.stderr
    # Within 5 s of work (the CPU the CLI used: on a shared 2-core machine the wall clock also counts waiting for a
    # core); and nothing waited for: well within the run's 60 s.
    assert cpu < 5.0, cpu
    assert not escaped.exists() and sorted(tmp_path.rglob("*")) == before


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime
