"""A compression bomb given to `minicluster up --restore` (issue 41): 5 members of 300 MB of zeros in a 1.5 MB
tar.gz, each under the 1 GiB a restore reads, together over it. It is refused as before, and the sizes its headers
declare are what refuse it: no member is held whole while the total is unknown (it was refused at 1.58 GB of RSS).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

from broker.jobs.archive import FORMAT_VERSION, KIND, read_archive
from broker.jobs.archive_members import MANIFEST, ArchiveError
from broker.jobs.store import JOURNAL_FILE
from broker.testing import pack_archive

MINICLUSTER = str(Path(sys.executable).parent / "minicluster")
MEMBER = 300 << 20
CHUNK = 1 << 20
REFUSED = "the archive unpacks to more than the 1 GiB a restore reads"


def pack_bomb(path: Path, members: int = 5, size: int = MEMBER) -> Path:
    """A sound-looking queue archive (every member listed with its true sha256) whose members are `size` zero
    bytes each, as a multi-member gzip: one compressed MiB of zeros, repeated (1.5 MB for 1.5 GB, made at once)."""
    zeros = gzip.compress(bytes(CHUNK), compresslevel=9)
    digest = hashlib.sha256()
    for _ in range(size // CHUNK):
        digest.update(bytes(CHUNK))
    names = [f"output/{i}.jsonl" for i in range(members)]
    files = {name: digest.hexdigest() for name in names} | {JOURNAL_FILE: hashlib.sha256(b"").hexdigest()}
    manifest = {"kind": KIND, "format": FORMAT_VERSION, "created": 1.0, "source": {}, "jobs": [], "files": files}

    def header(name: str, length: int) -> bytes:
        info = tarfile.TarInfo(name)
        info.size = length
        return info.tobuf(tarfile.PAX_FORMAT)

    def padded(data: bytes) -> bytes:
        return data + bytes(-len(data) % tarfile.BLOCKSIZE)

    document = json.dumps(manifest).encode()
    with open(path, "wb") as out:
        out.write(gzip.compress(header(MANIFEST, len(document)) + padded(document) + header(JOURNAL_FILE, 0)))
        for name in names:
            out.write(gzip.compress(header(name, size)))
            for _ in range(size // CHUNK):
                out.write(zeros)
        out.write(gzip.compress(bytes(2 * tarfile.BLOCKSIZE)))
    return path


def _peak_rss_mb(argv: list[str], env: dict[str, str], log: Path) -> tuple[int, float]:
    """(exit code, peak resident MB) of a child process, from its own rusage."""
    with open(log, "wb") as out:
        actions = [(os.POSIX_SPAWN_DUP2, out.fileno(), 1), (os.POSIX_SPAWN_DUP2, out.fileno(), 2)]
        pid = os.posix_spawn(argv[0], argv, env, file_actions=actions)
        _, status, usage = os.wait4(pid, 0)
    return os.waitstatus_to_exitcode(status), usage.ru_maxrss / 1024


def test_the_bomb_is_small_and_would_pass_every_other_check(tmp_path: Path) -> None:
    """The same shape, small enough to read: a sound archive, so only its size refuses the big one."""
    small = pack_bomb(tmp_path / "small.tar.gz", members=2, size=2 * CHUNK)
    assert sorted(read_archive(small).outputs) == ["0.jsonl", "1.jsonl"]
    assert pack_bomb(tmp_path / "bomb.tar.gz").stat().st_size < 2 << 20


def test_a_bomb_is_refused_from_its_headers_without_holding_its_members(tmp_path: Path) -> None:
    bomb = pack_bomb(tmp_path / "bomb.tar.gz")
    spec = tmp_path / "restore.yaml"
    doc = {"apiVersion": "miniclusters.dev/v1alpha1", "kind": "MiniCluster", "metadata": {"name": "bomb"}}
    spec.write_text(yaml.safe_dump({**doc, "spec": {"size": 1, "containers": [{"image": "local"}]}}))
    env = {**os.environ, "MINICLUSTERS_STATE_DIR": str(tmp_path / "state"), "MINICLUSTER_BACKEND": "local"}
    foreign = pack_archive(tmp_path / "foreign.tar.gz", [("run.sh", tarfile.REGTYPE, b"x", "")])
    code, baseline = _peak_rss_mb([MINICLUSTER, "up", str(spec), "--restore", str(foreign)], env, tmp_path / "a")
    assert code == 2 and "is not a file a queue archive holds" in (tmp_path / "a").read_text()
    code, peak = _peak_rss_mb([MINICLUSTER, "up", str(spec), "--restore", str(bomb)], env, tmp_path / "b")
    said = (tmp_path / "b").read_text()
    assert code == 2 and f"--restore: {bomb}: {REFUSED}" in said, said
    assert peak - baseline < 200, f"the restore check grew by {peak - baseline:.0f} MB"
    assert not (tmp_path / "state").exists() or not list((tmp_path / "state").rglob("minicluster.json"))


LEAD_CHECK = """
import resource, sys
from broker.jobs.archive import ArchiveError, read_archive
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    read_archive(sys.argv[1], cluster="bomb")
except ArchiveError as exc:
    print(exc)
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024)
"""


def _checked_in_a_child(archive: Path) -> tuple[str, float]:
    """(what read_archive said, how many MB its process grew reading) in a fresh process."""
    done = subprocess.run([sys.executable, "-c", LEAD_CHECK, str(archive)], capture_output=True, text=True, timeout=600)
    said, growth = done.stdout.splitlines()
    return said, float(growth)


def test_the_lead_refuses_it_with_the_same_message(tmp_path: Path) -> None:
    """The lead's restore (content.restore) reads with the same function: the same refusal, the same bound."""
    bomb = pack_bomb(tmp_path / "bomb.tar.gz")
    said, growth = _checked_in_a_child(bomb)
    assert said == f"{bomb}: {REFUSED}"
    assert growth < 200, f"the lead's restore check grew by {growth:.0f} MB"


def test_a_huge_extended_header_is_refused_by_its_declared_size(tmp_path: Path) -> None:
    """tarfile reads a pax header whole: 900 MB of one (under the 1 GiB limit) is refused from its header block."""
    path = tmp_path / "pax-bomb.tar.gz"
    info = tarfile.TarInfo("././@PaxHeader")
    info.type, info.size = tarfile.XHDTYPE, 900 << 20
    zeros = gzip.compress(bytes(CHUNK), compresslevel=9)
    with open(path, "wb") as out:
        out.write(gzip.compress(info.tobuf(tarfile.USTAR_FORMAT)))
        for _ in range(info.size // CHUNK):
            out.write(zeros)
    said, growth = _checked_in_a_child(path)
    assert growth < 200, f"the restore check grew by {growth:.0f} MB"  # 1.8 GB before, refused as unreadable
    assert said == f"{path}: an extended tar header of {900 << 20} bytes: more than the 1 MiB a restore reads"


def test_an_archive_at_the_limit_declared_by_its_headers_still_reads(tmp_path: Path) -> None:
    """The declared total is what counts: members that fit together read, whatever their number."""
    archive = pack_bomb(tmp_path / "fits.tar.gz", members=3, size=4 * CHUNK)
    assert len(read_archive(archive, max_bytes=16 * CHUNK).outputs) == 3
    with pytest.raises(ArchiveError, match="unpacks to more than the 8 MiB a restore reads"):
        read_archive(archive, max_bytes=8 * CHUNK)


def test_damage_is_still_told(tmp_path: Path) -> None:
    archive = pack_bomb(tmp_path / "cut.tar.gz", members=2, size=2 * CHUNK)
    data = archive.read_bytes()
    archive.write_bytes(data[: len(data) // 2])
    with pytest.raises(ArchiveError, match="truncated"):
        read_archive(archive)
