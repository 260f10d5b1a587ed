"""The queue archive (broker/jobs/archive.py): the job store's files packed with a manifest, and every way a
damaged or foreign archive is refused before the state directory changes."""

from __future__ import annotations

import gzip
import io
import json
import tarfile
from pathlib import Path
from typing import cast

import pytest

from broker.jobs.archive import (
    FORMAT_VERSION,
    Source,
    read_archive,
    restore_into,
    write_archive,
)
from broker.jobs.archive_members import MANIFEST, ArchiveError
from broker.jobs.journal import JobEvent
from broker.jobs.record import replay
from broker.jobs.save_policy import save_policy
from broker.jobs.shapes import Jobspec, ManifestDoc
from broker.jobs.store import JobStore

SPEC = {"version": 1, "resources": [], "tasks": [], "attributes": {"system": {"environment": {"A": "1"}}}}


def _store_with_jobs(root: Path) -> JobStore:
    """Three jobs: 11 ended with output, 12 pending, 13 requeued with an interrupted attempt's output."""
    store = JobStore(root, fsync=False)
    store.restore(now_ms=1_000)
    events = []
    for jobid in (11, 12, 13):
        events += [
            JobEvent(jobid, "submit", 1.0, {"jobspec": SPEC, "userid": 0, "urgency": 16}),
            JobEvent(jobid, "depend", 1.0),
            JobEvent(jobid, "priority", 1.0, {"priority": 16}),
        ]
    events += [
        JobEvent(11, "alloc", 2.0, {"ranks": [0], "cores": {"0": [0]}}),
        JobEvent(11, "finish", 3.0, {"status": 0}),
        JobEvent(11, "release", 3.0, {"ranks": [0], "final": True}),
        JobEvent(11, "clean", 3.0),
        JobEvent(13, "alloc", 2.0, {"ranks": [0], "cores": {"0": [1]}}),
        JobEvent(13, "requeue", 4.0, {}),
    ]
    store.append(*events)
    store.save_output(11, [["stdout", 0, "done\n"]])
    store.save_attempt_output(13, 0, [["stdout", 0, "half\n"]])
    return store


def _archive(tmp_path: Path) -> Path:
    store = _store_with_jobs(tmp_path / "old")
    path = tmp_path / "queue.tar.gz"
    write_archive(store, path, Source("demo", ["demo-0", "demo-1"], 2), {13})
    store.close()
    return path


def _read(tar: tarfile.TarFile, member: str | tarfile.TarInfo) -> bytes:
    """A regular member's bytes (extractfile answers None for anything else: none is in an archive of ours)."""
    data = tar.extractfile(member)
    assert data is not None, member
    return data.read()


def _rewrite(path: Path, change: dict[str, bytes | None]) -> None:
    """Rewrite the archive's members: bytes replace one, None drops it."""
    with tarfile.open(path) as tar:
        members = {m.name: _read(tar, m) for m in tar}
    for name, data in change.items():
        if data is None:
            members.pop(name, None)
        else:
            members[name] = data
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_round_trip_keeps_ids_states_outputs_and_the_epoch(tmp_path: Path) -> None:
    path = _archive(tmp_path)
    archive = read_archive(path, cluster="demo")
    assert [(j.id, j.state, j.requeued) for j in archive.manifest.jobs] == [
        (11, "INACTIVE", False),
        (12, "SCHED", False),
        (13, "SCHED", True),
    ]
    assert archive.manifest.source.hosts == ["demo-0", "demo-1"]
    new = tmp_path / "new"
    assert restore_into(new, archive) is True
    store = JobStore(new, fsync=False)
    saved = store.restore(now_ms=99_999)
    assert saved.epoch_ms == 1_000  # ids keep counting from the old cluster's epoch
    assert saved.queue.started and saved.queue.enabled
    jobs = replay(saved.events)
    assert {j: r.state.name for j, r in jobs.items()} == {11: "INACTIVE", 12: "SCHED", 13: "SCHED"}
    assert jobs[12].jobspec["attributes"]["system"]["environment"] == {"A": "1"}
    assert store.load_output(11) == [["stdout", 0, "done\n"]]
    assert (new / "output" / "13.attempt-0.jsonl").read_text() == '["stdout",0,"half\\n"]\n'
    store.close()
    assert restore_into(new, archive) is False  # a restarted lead does not restore twice
    assert len(replay(JobStore(new, fsync=False).restore(0).events)) == 3


def test_a_state_directory_holding_other_jobs_is_refused_untouched(tmp_path: Path) -> None:
    archive = read_archive(_archive(tmp_path))
    other = _store_with_jobs(tmp_path / "busy")
    other.close()
    before = (tmp_path / "busy" / "journal.jsonl").read_bytes()
    with pytest.raises(ArchiveError, match="already holds 3 jobs"):
        restore_into(tmp_path / "busy", archive)
    assert (tmp_path / "busy" / "journal.jsonl").read_bytes() == before


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ({"journal.jsonl": b'{"id":12,"name":"submit"}\n'}, "journal.jsonl: sha256 does not match"),
        ({"output/11.jsonl": None}, "output/11.jsonl is listed but missing"),
        ({"output/99.jsonl": b"[]\n"}, "output/99.jsonl is not listed in the manifest"),
        ({MANIFEST: None}, "no manifest.json: not a miniclusters queue archive"),
        ({MANIFEST: b"{not json"}, "manifest.json is damaged"),
    ],
)
def test_damaged_archives_say_why(tmp_path: Path, damage: dict[str, bytes | None], message: str) -> None:
    path = _archive(tmp_path)
    _rewrite(path, damage)
    with pytest.raises(ArchiveError, match=message):
        read_archive(path)


def _manifest(path: Path) -> ManifestDoc:
    with tarfile.open(path) as tar:
        return json.loads(_read(tar, MANIFEST))


def test_foreign_kind_version_cluster_and_index(tmp_path: Path) -> None:
    path = _archive(tmp_path)
    original = _manifest(path)
    with pytest.raises(ArchiveError, match="saved from MiniCluster 'demo', not 'other'"):
        read_archive(path, cluster="other")
    _rewrite(path, {MANIFEST: json.dumps({**original, "format": FORMAT_VERSION + 1}).encode()})
    with pytest.raises(ArchiveError, match=f"format version {FORMAT_VERSION + 1} is not supported"):
        read_archive(path)
    _rewrite(path, {MANIFEST: json.dumps({**original, "kind": "flux-content-archive"}).encode()})
    with pytest.raises(ArchiveError, match="a foreign archive"):
        read_archive(path)
    jobs = [dict(j, state="RUN") if j["id"] == 12 else j for j in original["jobs"]]
    _rewrite(path, {MANIFEST: json.dumps({**original, "jobs": jobs}).encode()})
    with pytest.raises(ArchiveError, match="job index disagrees with the journal"):
        read_archive(path)


def test_truncated_and_not_an_archive(tmp_path: Path) -> None:
    path = _archive(tmp_path)
    data = path.read_bytes()
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(ArchiveError, match="truncated"):
        read_archive(cut)
    raw = gzip.decompress(data)
    short = tmp_path / "short.tar"
    short.write_bytes(raw[:1024])  # the manifest's header and part of its body only
    with pytest.raises(ArchiveError, match="truncated"):
        read_archive(short)
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    with pytest.raises(ArchiveError, match="not a readable tar archive"):
        read_archive(text)
    with pytest.raises(ArchiveError, match="no such file"):
        read_archive(tmp_path / "missing.tar.gz")


def test_save_policy_is_a_jobspec_attribute() -> None:
    def spec(**system: object) -> Jobspec:
        return cast(Jobspec, {"attributes": {"system": system}})  # only the attributes save_policy reads

    assert save_policy(spec()).policy == "requeue"
    assert save_policy(spec(**{"save-policy": "finish"})).policy == "finish"
    policy = save_policy(spec(**{"save-policy": "checkpoint", "checkpoint-signal": "USR2", "checkpoint-timeout": "2m"}))
    assert (policy.policy, policy.signal, policy.timeout) == ("checkpoint", 12, 120.0)
    with pytest.raises(ValueError, match=r"attributes\.system\.save-policy: 'later' is not one of"):
        save_policy(spec(**{"save-policy": "later"}))
    with pytest.raises(ValueError, match="checkpoint-signal: 'SIGNOPE' is not a signal"):
        save_policy(spec(**{"checkpoint-signal": "SIGNOPE"}))
    with pytest.raises(ValueError, match="checkpoint-timeout: 'inf' must be positive and finite"):
        save_policy(spec(**{"checkpoint-timeout": "inf"}))
