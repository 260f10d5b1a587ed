"""`minicluster up --restore` refuses a foreign or damaged archive, or a flavour that cannot read it, with exit
code 2 and before anything is created (no pods, no state)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from broker.jobs.archive import Source, write_archive
from broker.jobs.journal import JobEvent
from broker.jobs.store import JobStore
from miniclusters.cli import main


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
