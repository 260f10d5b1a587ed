"""Hostile queue archives (broker/jobs/archive.py): a member that would land outside the state directory, a link
or device, a duplicate, or more than the reader will hold is refused by name before a byte is written; anything
else thrown at the reader (hypothesis) ends in an ArchiveError, never in a write outside its directory."""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import json
import os
import re
import tarfile
import time
from pathlib import Path
from typing import IO

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.jobs.archive import (
    FORMAT_VERSION,
    KIND,
    QueueArchive,
    Source,
    read_archive,
    restore_into,
    write_archive,
)
from broker.jobs.archive_members import MANIFEST, ArchiveError
from broker.jobs.journal import JobEvent
from broker.jobs.store import JOURNAL_FILE, JobStore
from broker.testing import ArchiveMember, pack_archive

Member = ArchiveMember
REGULAR = tarfile.REGTYPE


def _manifest(listed: dict[str, bytes]) -> bytes:
    files = {name: hashlib.sha256(data).hexdigest() for name, data in listed.items()}
    document = {"kind": KIND, "format": FORMAT_VERSION, "created": 1.0, "source": {}, "jobs": [], "files": files}
    return json.dumps(document).encode()


def _pack(path: Path, members: list[Member], compress: bool = True) -> Path:
    return pack_archive(path, members, compress)


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*")}


# ---------------------------------------------------------------------------------------------- named refusals
@pytest.mark.parametrize(
    ("member", "message"),
    [
        (("output/../../escaped.jsonl", REGULAR, b"x", ""), "climbs out of its directory"),
        (("output/../../../etc/escaped", REGULAR, b"x", ""), "climbs out of its directory"),
        (("../escaped.jsonl", REGULAR, b"x", ""), "climbs out of its directory"),
        (("/tmp/escaped.jsonl", REGULAR, b"x", ""), "is an absolute path"),
        (("output/a\\..\\..\\b.jsonl", REGULAR, b"x", ""), "contains a backslash"),
        (("output/./1.jsonl", REGULAR, b"x", ""), "is not a plain relative path"),
        (("output//1.jsonl", REGULAR, b"x", ""), "is not a plain relative path"),
        (("output/sub/1.jsonl", REGULAR, b"x", ""), "is not a file a queue archive holds"),
        (("run.sh", REGULAR, b"rm -rf /", ""), "is not a file a queue archive holds"),
        (("output/" + "x" * 250 + ".jsonl", REGULAR, b"x", ""), "has a path component longer than 255 bytes"),
        (("output/1.jsonl", tarfile.SYMTYPE, b"", "/etc/passwd"), "is a symbolic link (to '/etc/passwd')"),
        (("output/1.jsonl", tarfile.LNKTYPE, b"", "journal.jsonl"), "is a hard link (to 'journal.jsonl')"),
        (("output/1.jsonl", tarfile.CHRTYPE, b"", ""), "is a character device"),
        (("output/1.jsonl", tarfile.BLKTYPE, b"", ""), "is a block device"),
        (("output/1.jsonl", tarfile.FIFOTYPE, b"", ""), "is a FIFO"),
        (("output/1.jsonl", tarfile.DIRTYPE, b"", ""), "is a directory"),
    ],
)
def test_a_hostile_member_is_refused_by_name_before_anything_is_written(
    tmp_path: Path, member: Member, message: str
) -> None:
    archive = _pack(tmp_path / "hostile.tar.gz", [member])
    state = tmp_path / "a" / "b" / "state"
    before = _files(tmp_path)
    with pytest.raises(ArchiveError, match=re.escape(f"archive member {member[0]!r} {message}")):
        restore_into(state, read_archive(archive))
    assert _files(tmp_path) == before  # nothing written, inside the state directory or out


def test_a_duplicate_member_is_refused(tmp_path: Path) -> None:
    archive = _pack(
        tmp_path / "twice.tar.gz", [("output/1.jsonl", REGULAR, b"a", ""), ("output/1.jsonl", REGULAR, b"b", "")]
    )
    with pytest.raises(ArchiveError, match=re.escape("archive member 'output/1.jsonl' appears twice")):
        read_archive(archive)


def test_restore_into_checks_every_output_before_it_writes_one(tmp_path: Path) -> None:
    """A QueueArchive built by hand (not read) is held to the same rules, and a symlink planted in the state
    directory's output/ is not followed."""
    state = tmp_path / "state"
    (state / "output").mkdir(parents=True)
    outside = tmp_path / "outside.jsonl"
    (state / "output" / "2.jsonl").symlink_to(outside)
    manifest = read_archive(_pack(tmp_path / "ok.tar.gz", [])).manifest
    for outputs, message in [
        ({"1.jsonl": b"a", "../../escaped.jsonl": b"b"}, "'output/../../escaped.jsonl' climbs out of its directory"),
        ({"1.jsonl": b"a", "2.jsonl": b"b"}, "'output/2.jsonl' is a symbolic link in the state directory"),
    ]:
        archive = QueueArchive(manifest, [], outputs, "0" * 64)
        with pytest.raises(ArchiveError, match=re.escape(message)):
            restore_into(state, archive)
        assert not (state / "output" / "1.jsonl").exists() and not outside.exists()
        assert not (tmp_path / "escaped.jsonl").exists()


# ---------------------------------------------------------------------------------------------- bounded reading
def test_a_member_larger_than_the_limit_is_refused_unread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A gzip bomb: 64 MiB of zeros compress to 64 KiB; its declared size is refused before it is read."""
    from broker.jobs import archive_members

    archive = _pack(tmp_path / "bomb.tar.gz", [("output/1.jsonl", REGULAR, bytes(64 << 20), "")])
    assert archive.stat().st_size < 1 << 20
    read: list[str] = []
    real_read = archive_members._read

    def counted(handle: IO[bytes] | None, info: tarfile.TarInfo) -> bytes:
        read.append(info.name)
        return real_read(handle, info)

    monkeypatch.setattr(archive_members, "_read", counted)
    with pytest.raises(ArchiveError, match=re.escape("'output/1.jsonl' declares 67108864 bytes: more than the 1 MiB")):
        read_archive(archive, max_bytes=1 << 20)
    assert read == []  # refused by its header: no member's bytes were read


def test_a_huge_extended_header_is_refused_at_the_limit(tmp_path: Path) -> None:
    """tarfile reads a pax header whole: the stream it reads from is what stops it."""
    path = tmp_path / "pax.tar.gz"
    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo(MANIFEST)
        info.pax_headers = {"comment": "x" * (8 << 20)}
        tar.addfile(info, io.BytesIO(b""))
    with pytest.raises(ArchiveError, match=re.escape("more than the 1 MiB a restore reads")):
        read_archive(path, max_bytes=1 << 20)


def test_too_many_members_are_refused(tmp_path: Path) -> None:
    members = [(f"output/{i}.jsonl", REGULAR, b"", "") for i in range(20)]
    with pytest.raises(ArchiveError, match="more than 10 members"):
        read_archive(_pack(tmp_path / "many.tar.gz", members), max_members=10)


@pytest.mark.timeout(20)
@pytest.mark.parametrize("kind", ["fifo", "device", "directory"])
def test_an_archive_path_that_is_not_a_regular_file_is_refused_at_once(tmp_path: Path, kind: str) -> None:
    """A FIFO would block the reader forever, /dev/zero would never end."""
    path = tmp_path / "queue.tar.gz"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    else:
        path = Path("/dev/zero")
    with pytest.raises(ArchiveError, match=r"not a regular file|is a directory"):
        read_archive(path)


def test_a_saved_archive_still_reads_back(tmp_path: Path) -> None:
    """The checks refuse nothing `write_archive` writes (outputs of finished and interrupted runs)."""
    store = JobStore(tmp_path / "old", fsync=False)
    store.restore(now_ms=1)
    store.append(JobEvent(5, "submit", 1.0, {"jobspec": {"version": 1}, "userid": 0, "urgency": 16}))
    store.save_output(5, [["stdout", 0, "hi\n"]])
    store.save_attempt_output(5, 0, [["stdout", 0, "half\n"]])
    write_archive(store, tmp_path / "q.tar.gz", Source("demo", ["demo-0"], 1))
    store.close()
    archive = read_archive(tmp_path / "q.tar.gz")
    assert sorted(archive.outputs) == ["5.attempt-0.jsonl", "5.jsonl"]
    assert restore_into(tmp_path / "new", archive) is True


# ---------------------------------------------------------------------------------------------- fuzzing
COMPONENTS = st.one_of(
    st.sampled_from(["..", ".", "", "output", JOURNAL_FILE, MANIFEST, "etc", "1.jsonl", "a\\b", "x\x00y"]),
    st.text(alphabet=st.characters(exclude_categories=["Cs"]), min_size=1, max_size=12),
)
NAMES = st.builds(
    lambda absolute, parts: ("/" if absolute else "") + "/".join(parts),
    st.booleans(),
    st.lists(COMPONENTS, min_size=1, max_size=5),
)
KINDS = st.sampled_from(
    [REGULAR, tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.CHRTYPE, tarfile.BLKTYPE, tarfile.FIFOTYPE, tarfile.DIRTYPE]
)
MEMBERS = st.lists(
    st.tuples(NAMES, KINDS, st.binary(max_size=64), st.sampled_from(["", "/etc/passwd", "../../x", JOURNAL_FILE])),
    max_size=6,
)
SAFE = re.compile(r"(manifest\.json|journal\.jsonl|output/[^/\\\x00]+\.jsonl)")


def _written_outside(sandbox: Path, state: Path, before: set[Path]) -> set[Path]:
    return {p for p in _files(sandbox) - before if not p.is_relative_to(state)}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(members=MEMBERS, compress=st.booleans())
def test_fuzz_hostile_members_never_write_outside(tmp_path: Path, members: list[Member], compress: bool) -> None:
    sandbox = Path(tmp_path) / f"s{time.monotonic_ns()}"
    (sandbox / "deep" / "er").mkdir(parents=True)
    state = sandbox / "deep" / "er" / "state"
    try:
        archive = _pack(sandbox / "a.tar", members, compress=compress)
    except (ValueError, UnicodeError):
        return  # tarfile itself cannot write such a name
    before = _files(sandbox)
    try:
        restore_into(state, read_archive(archive))
    except ArchiveError as exc:
        assert str(exc).startswith(str(archive)) or str(exc).startswith(str(state))
    else:
        for name, kind, _, _ in members:  # accepted: every member was a plain file of the archive's own layout
            assert kind == REGULAR and SAFE.fullmatch(name), name
    assert not _written_outside(sandbox, state, before)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzz_damaged_bytes_only_ever_raise_archive_error(tmp_path: Path, data: st.DataObject) -> None:
    """Any byte changed, cut or added in a real archive (compressed or not) ends in ArchiveError or a
    well-formed archive, never another exception."""
    base = Path(tmp_path) / "base.tar"
    if not base.exists():
        _pack(base, [("output/1.jsonl", REGULAR, b'["stdout",0,"hi\\n"]\n', "")], compress=False)
    raw = bytearray(base.read_bytes())
    if data.draw(st.booleans(), label="gzip"):
        raw = bytearray(gzip.compress(bytes(raw)))
    for _ in range(data.draw(st.integers(1, 4), label="changes")):
        at = data.draw(st.integers(0, len(raw) - 1), label="at")
        how = data.draw(st.sampled_from(["flip", "cut", "insert"]), label="how")
        if how == "flip":
            raw[at] ^= data.draw(st.integers(1, 255), label="xor")
        elif how == "cut":
            del raw[at:]
            if not raw:
                raw = bytearray(b"\0")
        else:
            raw[at:at] = data.draw(st.binary(min_size=1, max_size=600), label="bytes")
    damaged = Path(tmp_path) / "damaged.tar"
    damaged.write_bytes(bytes(raw))
    with contextlib.suppress(ArchiveError):
        read_archive(damaged, max_bytes=1 << 20)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
EVENTS = st.fixed_dictionaries(
    {
        "id": st.one_of(st.integers(0, 3), JSON),
        "name": st.sampled_from(
            [
                "submit",
                "depend",
                "priority",
                "alloc",
                "finish",
                "release",
                "clean",
                "exception",
                "requeue",
                "annotate",
                "urgency",
                "queue",
                "epoch",
            ]
        ),
        "timestamp": st.one_of(st.floats(), JSON),
        "context": st.one_of(
            st.fixed_dictionaries(
                {},
                optional={
                    "jobspec": JSON,
                    "extra": JSON,
                    "status": JSON,
                    "ranks": JSON,
                    "cores": JSON,
                    "priority": JSON,
                    "urgency": JSON,
                    "type": JSON,
                },
            ),
            JSON,
        ),
    }
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=st.lists(st.one_of(EVENTS, JSON), max_size=6), index=st.one_of(st.just(None), JSON))
def test_fuzz_a_journal_and_index_with_true_checksums_only_ever_raise_archive_error(
    tmp_path: Path, events: list[object], index: object
) -> None:
    """Another cluster's journal is replayed by code written for our own: whatever it holds (with checksums
    that match), the reader answers ArchiveError or a queue, never a traceback."""
    journal = "".join(json.dumps(event) + "\n" for event in events).encode()
    path = _pack(Path(tmp_path) / "journal.tar", [(JOURNAL_FILE, REGULAR, journal, "")], compress=False)
    if index is not None:  # a hostile manifest: its job index (and anything else) replaced
        manifest = json.loads(_manifest({JOURNAL_FILE: journal}))
        manifest["jobs"] = index
        with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
            for name, data in ((MANIFEST, json.dumps(manifest).encode()), (JOURNAL_FILE, journal)):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    with contextlib.suppress(ArchiveError):
        read_archive(path)


def test_a_deeply_nested_manifest_is_damaged_not_a_crash(tmp_path: Path) -> None:
    path = _pack(tmp_path / "deep.tar", [], compress=False)
    with tarfile.open(path, "w") as tar:
        for name, data in ((MANIFEST, b"[" * 100_000), (JOURNAL_FILE, b"")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    with pytest.raises(ArchiveError, match=r"manifest\.json is damaged"):
        read_archive(path)
