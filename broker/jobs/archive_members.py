"""Reading an untrusted queue archive's members, bounded (archive.py checks what they say).

Every member must be a regular file of the archive's own layout (manifest.json, journal.jsonl,
output/<file>.jsonl), never absolute, climbing (`..`), duplicated, a link, device, FIFO or directory; what is read
is bounded: MAX_BYTES unpacked, MAX_MEMBERS members, MAX_EXTENDED_HEADER for a header tarfile reads whole.

The archive is read twice. The first pass reads headers only (tarfile in stream mode reads past a member's
contents in small blocks, keeping none) and refuses on the sizes they declare: a compression bomb (5 members of
300 MB of zeros in a 1.5 MB file) is refused at its fourth header, holding nothing; it was refused only when the
unpacked stream passed the limit, with 1.5 GB resident. The second pass, once the whole archive is known to fit,
reads the members, every check made again (the file may have changed in between).
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import stat
import tarfile
import zlib
from pathlib import Path
from typing import IO, Any

from broker.errors import InputError
from broker.jobs.store import JOURNAL_FILE, OUTPUT_DIR

MANIFEST = "manifest.json"


class ArchiveError(InputError):
    """The archive cannot be restored (damaged, foreign, another version) or written; the message says why."""


MAX_BYTES = 1 << 30
"""Most bytes a restore reads out of an archive (unpacked: headers and members): the archive is held in memory
until it is verified, so a hostile one (a gzip bomb, a giant header) must not exhaust it. A queue's journal
and outputs are far smaller; a save that would exceed it fails on its read-back, and the queue runs on."""
MAX_MEMBERS = 200_000
"""Most members a restore reads (one per output file, beside the manifest and the journal)."""
MAX_EXTENDED_HEADER = 1 << 20
"""Most bytes of one pax or GNU long-name header, which tarfile reads whole: ours carry a short name at most."""
NAME_MAX = 255
"""Bytes in one path component (Linux's NAME_MAX): a longer output name could not be written."""

_DECODING_ERRORS = (EOFError, tarfile.ReadError, OSError, ValueError, zlib.error, lzma.LZMAError)
"""What a damaged stream raises anywhere below tarfile (gzip's BadGzipFile is an OSError)."""
_KINDS = {
    tarfile.SYMTYPE: "a symbolic link",
    tarfile.LNKTYPE: "a hard link",
    tarfile.CHRTYPE: "a character device",
    tarfile.BLKTYPE: "a block device",
    tarfile.FIFOTYPE: "a FIFO",
    tarfile.DIRTYPE: "a directory",
    tarfile.GNUTYPE_SPARSE: "a sparse file",
}
_EXTENDED = (
    tarfile.XHDTYPE,
    tarfile.XGLTYPE,
    tarfile.SOLARIS_XHDTYPE,
    tarfile.GNUTYPE_LONGNAME,
    tarfile.GNUTYPE_LONGLINK,
)


def _size(limit: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if limit >= scale and limit % scale == 0:
            return f"{limit // scale} {unit}"
    return f"{limit} bytes"


def member_name_problem(name: str) -> str | None:
    """Why an archive member of this name cannot be restored (None: it can), before anything is written: a
    restore writes `output/<file>` members into the state directory's output/, so a name must be one of the
    archive's own files, never absolute, never climbing, never anything a path could be bent with."""
    if not name:
        return "has an empty name"
    if "\x00" in name:
        return "contains a NUL byte"
    if "\\" in name:
        return "contains a backslash"
    if name.startswith("/"):
        return "is an absolute path"
    parts = name.split("/")
    if ".." in parts:
        return "climbs out of its directory"
    if any(part in ("", ".") for part in parts):
        return "is not a plain relative path"
    if any(len(part.encode(errors="surrogateescape")) > NAME_MAX for part in parts):
        return f"has a path component longer than {NAME_MAX} bytes"
    if name in (MANIFEST, JOURNAL_FILE):
        return None
    if len(parts) == 2 and parts[0] == OUTPUT_DIR and parts[1].endswith(".jsonl"):
        return None
    return f"is not a file a queue archive holds ({MANIFEST}, {JOURNAL_FILE}, {OUTPUT_DIR}/<file>.jsonl)"


def _member_problem(info: tarfile.TarInfo) -> str | None:
    """Why this member is refused: its name, or anything but a regular file (links, devices, FIFOs, ...)."""
    problem = member_name_problem(info.name)
    if problem is not None:
        return problem
    if info.isreg() and not info.issparse():
        return None
    kind = "a sparse file" if info.issparse() else _KINDS.get(info.type, f"of tar type {info.type!r}")
    target = f" (to {info.linkname!r})" if info.issym() or info.islnk() else ""
    return f"is {kind}{target}: a queue archive holds regular files only"


class _ExtendedHeaderTooLarge(InputError):
    """Raised inside tarfile, which does not know the archive's path; told as an ArchiveError outside it."""

    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.size = size


class _CheckedTarInfo(tarfile.TarInfo):
    """Refuses an extended header by the size its own header block declares, before tarfile reads it whole
    (`_proc_member` is tarfile's documented hook for subclasses)."""

    def _proc_member(self, tarfile: tarfile.TarFile) -> Any:
        if self.type in _EXTENDED and self.size > MAX_EXTENDED_HEADER:
            raise _ExtendedHeaderTooLarge(self.size)
        return super()._proc_member(tarfile)  # type: ignore[misc]


class _Bounded(io.RawIOBase):
    """The unpacked stream tarfile reads, refused past `limit` bytes: whatever the headers say, the cap sits below
    tarfile too (a damaged stream, header blocks, padding)."""

    def __init__(self, inner: io.BufferedIOBase, limit: int, path: Path) -> None:
        self.inner, self.limit, self.path, self.count = inner, limit, path, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        data = self.inner.read(min(len(view), self.limit + 1 - self.count))
        self.count += len(data)
        if self.count > self.limit:
            raise ArchiveError(_too_large(self.path, self.limit))
        view[: len(data)] = data
        return len(data)


def _too_large(path: Path, limit: int) -> str:
    return f"{path}: the archive unpacks to more than the {_size(limit)} a restore reads"


def _open_regular(path: Path) -> io.BufferedReader:
    """The archive file, refused unless a regular file: a FIFO would block the reader, a device never end."""
    try:
        # O_NONBLOCK: opening a FIFO for reading returns at once instead of waiting for a writer
        raw = open(path, "rb", opener=lambda p, flags: os.open(p, flags | os.O_NONBLOCK))  # noqa: SIM115
    except FileNotFoundError:
        raise ArchiveError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ArchiveError(f"{path}: is a directory, not an archive") from None
    except PermissionError:
        raise ArchiveError(f"{path}: permission denied") from None
    except OSError as exc:
        raise ArchiveError(f"{path}: cannot open the archive: {exc.strerror or exc}") from None
    mode = os.fstat(raw.fileno()).st_mode
    if not stat.S_ISREG(mode):
        raw.close()
        if stat.S_ISDIR(mode):
            raise ArchiveError(f"{path}: is a directory, not an archive")
        raise ArchiveError(f"{path}: is not a regular file (a FIFO, device or socket): not an archive")
    return raw


def _unpacked(raw: io.BufferedReader) -> io.BufferedIOBase:
    """The tar stream inside: gzip (what `save` writes), bzip2, xz, or none, told by the first bytes."""
    magic = raw.peek(6)[:6]
    if magic.startswith(b"\x1f\x8b"):
        return gzip.GzipFile(fileobj=raw, mode="rb")
    if magic.startswith(b"BZh"):
        return bz2.BZ2File(raw, mode="rb")
    if magic.startswith(b"\xfd7zXZ\x00"):
        return lzma.LZMAFile(raw, mode="rb")
    return raw


class _Tally:
    """What the headers read so far declare: each member checked (name, kind, novelty, count, size) before any
    byte of it is read, and the sizes summed, so the archive is refused at the header that takes it past the
    limit rather than once the members before it are unpacked."""

    def __init__(self, path: Path, max_bytes: int, max_members: int) -> None:
        self.path, self.max_bytes, self.max_members = path, max_bytes, max_members
        self.names: set[str] = set()
        self.declared = 0

    def admit(self, info: tarfile.TarInfo) -> None:
        path = self.path
        problem = _member_problem(info)
        if problem is not None:
            raise ArchiveError(f"{path}: archive member {info.name!r} {problem}")
        if info.name in self.names:
            raise ArchiveError(f"{path}: archive member {info.name!r} appears twice: the archive was altered")
        if len(self.names) >= self.max_members:
            raise ArchiveError(f"{path}: the archive holds more than {self.max_members} members: not restored")
        if info.size > self.max_bytes:
            raise ArchiveError(
                f"{path}: archive member {info.name!r} declares {info.size} bytes: more than the "
                f"{_size(self.max_bytes)} a restore reads"
            )
        self.declared += info.size
        if self.declared > self.max_bytes:
            raise ArchiveError(_too_large(path, self.max_bytes))
        self.names.add(info.name)


def _read(handle: IO[bytes] | None, info: tarfile.TarInfo) -> bytes:
    assert handle is not None
    data = handle.read()
    if len(data) != info.size:
        raise EOFError(f"{info.name} is cut short")
    return data


def _pass(raw: io.BufferedReader, path: Path, max_bytes: int, max_members: int, keep: bool) -> dict[str, bytes]:
    """One pass over the archive from its start: every header admitted (_Tally); with `keep`, each member's
    bytes."""
    raw.seek(0)
    out: dict[str, bytes] = {}
    tally = _Tally(path, max_bytes, max_members)
    try:
        stream = io.BufferedReader(_Bounded(_unpacked(raw), max_bytes, path))
        tar = tarfile.open(fileobj=stream, mode="r|", tarinfo=_CheckedTarInfo)  # noqa: SIM115 - closed below
    except ArchiveError:
        raise
    except _ExtendedHeaderTooLarge as exc:
        raise ArchiveError(_header_too_large(path, exc.size)) from None
    except _DECODING_ERRORS as exc:
        raise ArchiveError(f"{path}: not a readable tar archive ({_first_line(exc)})") from None
    try:
        with tar:
            for info in tar:
                tally.admit(info)
                if keep:
                    out[info.name] = _read(tar.extractfile(info), info)
    except ArchiveError:
        raise
    except _ExtendedHeaderTooLarge as exc:
        raise ArchiveError(_header_too_large(path, exc.size)) from None
    except _DECODING_ERRORS as exc:
        raise ArchiveError(f"{path}: truncated: the archive ends early ({_first_line(exc)})") from None
    return out


def _header_too_large(path: Path, size: int) -> str:
    return f"{path}: an extended tar header of {size} bytes: more than the {_size(MAX_EXTENDED_HEADER)} a restore reads"


def read_members(
    path: Path, max_bytes: int = MAX_BYTES, max_members: int = MAX_MEMBERS
) -> tuple[dict[str, bytes], str]:
    """Every member's bytes, each name and kind checked before it is read, at most `max_bytes` unpacked and
    `max_members` members, read only once the headers said the whole archive fits; and the sha256 of the
    archive file that was read (through the same descriptor)."""
    with _open_regular(path) as raw:
        _pass(raw, path, max_bytes, max_members, keep=False)
        out = _pass(raw, path, max_bytes, max_members, keep=True)
        raw.seek(0)
        import hashlib  # here, not at the top: hashlib loads OpenSSL (about 3 MB), which an idle broker never needs

        return out, hashlib.file_digest(raw, "sha256").hexdigest()


def _first_line(exc: BaseException) -> str:
    return (str(exc) or type(exc).__name__).splitlines()[0].rstrip(":")
