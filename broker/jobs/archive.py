"""The queue archive: a job store (store.py) packed for another cluster, verified before anything is restored.

An archive is a tar file holding the state directory's own files, unchanged: `journal.jsonl` (every job's
events: ids, jobspecs with their environment, each job's state) and `output/*.jsonl` (outputs so far, including
`<id>.attempt-<n>.jsonl` of runs a save interrupted), beside `manifest.json`: the format version, a sha256 of
every member, the source cluster's identity and an index of the jobs with their saved state. There is no second
format: restoring appends the archived journal to an empty state directory, whose one reader (JobStore.restore)
then rebuilds the queue as after any lead restart.

Reading checks everything before a byte is written: a member missing, unlisted, altered or cut short, a foreign
kind, a format version we do not read, an index that disagrees with the journal, and (when the caller says
which) another cluster's name. An archive is also untrusted input: every member must be a regular file of the
archive's own layout, never a link or device, and what is read is bounded, by the sizes the headers declare
before any member is read (archive_members.py); restore_into checks again that each output resolves inside the
state directory's output/ and follows no link.
Each failure is an ArchiveError saying which and why, naming the member.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from broker.jobs.archive_members import (
    MANIFEST,
    MAX_BYTES,
    MAX_MEMBERS,
    ArchiveError,
    member_name_problem,
    read_members,
)
from broker.jobs.journal import JobEvent
from broker.jobs.record import replay
from broker.jobs.store import INSTANCE, JOURNAL_FILE, OUTPUT_DIR, JobStore, QueueState
from common import atomic

if TYPE_CHECKING:
    from broker.jobs.shapes import ArchiveSummary, ManifestDoc, SavedJobEntry

KIND = "miniclusters-queue-archive"
FORMAT_VERSION = 1
RESTORED = "restored"
"""The instance record a restore leaves in the journal: a restarted lead finds it and does not restore twice."""


@dataclass(frozen=True)
class Source:
    """Where an archive came from: the cluster a restore is checked against."""

    cluster: str = ""
    hosts: list[str] = field(default_factory=list)
    size: int = 0


@dataclass(frozen=True)
class SavedJob:
    """One line of the manifest's job index."""

    id: int
    state: str
    """Flux's state name when saved: SCHED (pending, or requeued by the save) or INACTIVE."""
    result: str = ""
    requeued: bool = False


@dataclass(frozen=True)
class Manifest:
    format: int
    created: float
    source: Source
    jobs: list[SavedJob]
    files: dict[str, str]
    """Member name -> sha256 hex of its bytes."""

    def to_json(self) -> str:
        source = self.source
        doc: ManifestDoc = {
            "kind": KIND,
            "format": self.format,
            "created": self.created,
            "source": {"cluster": source.cluster, "hosts": source.hosts, "size": source.size},
            "jobs": [{"id": j.id, "state": j.state, "result": j.result, "requeued": j.requeued} for j in self.jobs],
            "files": self.files,
        }
        return json.dumps(doc, indent=1)


@dataclass(frozen=True)
class QueueArchive:
    """A verified archive, in memory."""

    manifest: Manifest
    events: list[JobEvent]
    outputs: dict[str, bytes]
    """File name inside output/ -> its bytes."""
    sha256: str
    """Of the whole archive file: what a restore records so it is never applied twice."""


def _sha(data: bytes) -> str:
    import hashlib  # here, not at the top: hashlib loads OpenSSL (about 3 MB), which an idle broker never needs

    return hashlib.sha256(data).hexdigest()


# ---------------------------------------------------------------------------------------------- writing
def write_archive(
    store: JobStore, path: Path | str, source: Source, requeued: set[int] | frozenset[int] = frozenset()
) -> Manifest:
    """Pack the store's files as they are on disk now (the caller has flushed its journal), atomically."""
    members: dict[str, bytes] = {JOURNAL_FILE: store.journal.path.read_bytes()}
    for output in sorted(store.outdir.glob("*.jsonl")):
        members[f"{OUTPUT_DIR}/{output.name}"] = output.read_bytes()
    events = [JobEvent.from_json(line) for line in members[JOURNAL_FILE].decode().splitlines() if line.strip()]
    jobs = [
        SavedJob(r.jobid, r.state.name or "", r.result.value if r.result else "", r.jobid in requeued)
        for r in replay(e for e in events if e.jobid != INSTANCE).values()
    ]
    manifest = Manifest(FORMAT_VERSION, time.time(), source, jobs, {name: _sha(data) for name, data in members.items()})
    target = Path(path)
    try:  # into a directory that exists: a mistyped path is an error, not a new directory tree
        with (
            atomic.replacing(target, fsync=True) as temporary,
            open(temporary, "wb") as handle,
            tarfile.open(fileobj=handle, mode="w:gz") as tar,
        ):
            for name, data in [(MANIFEST, manifest.to_json().encode()), *members.items()]:
                info = tarfile.TarInfo(name)
                info.size, info.mtime, info.mode = len(data), int(manifest.created), 0o600
                tar.addfile(info, io.BytesIO(data))
    except OSError as exc:
        raise ArchiveError(f"{target}: cannot write the archive: {exc.strerror or exc}") from None
    return manifest


# ---------------------------------------------------------------------------------------------- reading
def _saved_job(job: SavedJobEntry) -> SavedJob:
    """One line of the index, its types checked (an id is compared and hashed, a state compared)."""
    unknown = set(job) - {"id", "state", "result", "requeued"}
    if unknown:
        raise KeyError(f"unknown job index field {sorted(unknown)[0]!r}")
    return SavedJob(int(job["id"]), str(job["state"]), str(job.get("result", "")), bool(job.get("requeued", False)))


def _manifest(path: Path, raw: bytes | None) -> Manifest:
    if raw is None:
        raise ArchiveError(f"{path}: no {MANIFEST}: not a miniclusters queue archive")
    try:
        data = json.loads(raw)
        if data.get("kind") != KIND:
            raise ArchiveError(f"{path}: {MANIFEST}: kind {data.get('kind')!r} is not {KIND!r}: a foreign archive")
        version = data.get("format")
        if version != FORMAT_VERSION:
            raise ArchiveError(
                f"{path}: format version {version!r} is not supported (this miniclusters reads {FORMAT_VERSION})"
            )
        given = data["source"]
        source = Source(
            str(given.get("cluster", "")), [str(h) for h in given.get("hosts", [])], int(given.get("size", 0))
        )
        jobs = [_saved_job(job) for job in data["jobs"]]
        files = {str(k): str(v) for k, v in data["files"].items()}
        return Manifest(int(version), float(data["created"]), source, jobs, files)
    except ArchiveError:
        raise
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        raise ArchiveError(f"{path}: {MANIFEST} is damaged ({type(exc).__name__}: {exc})") from None


def read_archive(
    path: Path | str, cluster: str | None = None, max_bytes: int = MAX_BYTES, max_members: int = MAX_MEMBERS
) -> QueueArchive:
    """The archive at `path`, every check passed; `cluster`: refuse one saved from a cluster of another name."""
    archive_path = Path(path)
    members, digest_of_file = read_members(archive_path, max_bytes, max_members)
    manifest = _manifest(archive_path, members.pop(MANIFEST, None))
    for name, digest in manifest.files.items():
        if name not in members:
            raise ArchiveError(f"{archive_path}: truncated or incomplete: {name} is listed but missing")
        if _sha(members[name]) != digest:
            raise ArchiveError(f"{archive_path}: {name}: sha256 does not match the manifest: the archive is damaged")
    unlisted = sorted(set(members) - set(manifest.files))
    if unlisted:
        raise ArchiveError(f"{archive_path}: {unlisted[0]} is not listed in the manifest: the archive was altered")
    if JOURNAL_FILE not in members:
        raise ArchiveError(f"{archive_path}: no {JOURNAL_FILE}: not a queue archive")
    try:
        events = [JobEvent.from_json(line) for line in members[JOURNAL_FILE].decode().splitlines() if line.strip()]
        rebuilt = {r.jobid: r.state.name for r in replay(e for e in events if e.jobid != INSTANCE).values()}
    except Exception as exc:  # another cluster's events, replayed by code written for our own journal
        raise ArchiveError(f"{archive_path}: {JOURNAL_FILE} is damaged ({type(exc).__name__}: {exc})") from None
    saved = {job.id: job.state for job in manifest.jobs}
    if saved != rebuilt:
        missing = sorted(set(saved) ^ set(rebuilt)) or [j for j in saved if saved[j] != rebuilt.get(j)]
        raise ArchiveError(f"{archive_path}: the job index disagrees with the journal (job {missing[0]}): damaged")
    if cluster is not None and manifest.source.cluster and manifest.source.cluster != cluster:
        raise ArchiveError(
            f"{archive_path}: saved from MiniCluster {manifest.source.cluster!r}, not {cluster!r}: "
            "restore it into a cluster of that name"
        )
    outputs = {name.removeprefix(f"{OUTPUT_DIR}/"): data for name, data in members.items() if name != JOURNAL_FILE}
    return QueueArchive(manifest, events, outputs, digest_of_file)


# ---------------------------------------------------------------------------------------------- restoring
def _present(root: Path) -> list[JobEvent]:
    if not (root / JOURNAL_FILE).exists():
        return []
    probe = JobStore(root, fsync=False)
    try:
        return list(probe.journal.events())
    finally:
        probe.close()


def restored_before(statedir: Path | str) -> bool:
    """True when this state directory already holds a restored queue: a restarted lead needs no archive."""
    return any(e.jobid == INSTANCE and e.name == RESTORED for e in _present(Path(statedir)))


def _output_targets(root: Path, outputs: dict[str, bytes]) -> list[tuple[Path, bytes]]:
    """Where each output goes, every one checked before the first is written: a name of the archive's own layout,
    not a symbolic link already in the state directory, and resolving to a file directly inside its output/."""
    outdir = (root / OUTPUT_DIR).resolve()
    targets = []
    for name, data in outputs.items():
        member = f"{OUTPUT_DIR}/{name}"
        problem = member_name_problem(member)
        if problem is None and member in (MANIFEST, JOURNAL_FILE):
            problem = "is not an output"
        target = outdir / name
        if problem is None and target.is_symlink():
            problem = "is a symbolic link in the state directory"
        if problem is None and target.resolve().parent != outdir:
            problem = "resolves outside its directory"
        if problem is not None:
            raise ArchiveError(f"{root}: archive member {member!r} {problem}")
        targets.append((target, data))
    return targets


def _write_new(target: Path, data: bytes) -> None:
    """Write one output, never through a symbolic link (one planted after the check included)."""
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o666)
    with open(fd, "wb") as handle:
        handle.write(data)


def restore_into(statedir: Path | str, archive: QueueArchive) -> bool:
    """Make `statedir` hold the archived queue, started; False when it already does (a lead restarted after the
    restore). A state directory holding other jobs is refused: two queues would share one id space."""
    root = Path(statedir)
    present = _present(root)
    if any(e.jobid == INSTANCE and e.name == RESTORED and e.context.get("sha256") == archive.sha256 for e in present):
        return False
    jobs = {e.jobid for e in present if e.jobid != INSTANCE}
    if jobs:
        raise ArchiveError(f"{root}: the state directory already holds {len(jobs)} jobs; restore into a new cluster")
    targets = _output_targets(root, archive.outputs)
    store = JobStore(root)
    try:
        for target, data in targets:
            _write_new(target, data)
        now = time.time()
        source = archive.manifest.source.cluster
        record = {"sha256": archive.sha256, "cluster": source, "jobs": len(archive.manifest.jobs)}
        # The save stopped the queue; the restored one starts with the new cluster's own policy.
        queue = QueueState()
        store.append(
            *archive.events,
            JobEvent(INSTANCE, "queue", now, queue.__dict__),
            JobEvent(INSTANCE, RESTORED, now, record),
        )
    except OSError as exc:
        raise ArchiveError(f"{root}: cannot restore into the state directory: {exc.strerror or exc}") from None
    finally:
        with contextlib.suppress(Exception):
            store.close()
    return True


def summary(manifest: Manifest) -> ArchiveSummary:
    """Counts people read: how many jobs, pending, requeued by the save, done."""
    return {
        "cluster": manifest.source.cluster,
        "jobs": len(manifest.jobs),
        "pending": sum(1 for j in manifest.jobs if j.state != "INACTIVE"),
        "requeued": sum(1 for j in manifest.jobs if j.requeued),
        "inactive": sum(1 for j in manifest.jobs if j.state == "INACTIVE"),
    }
