"""Reader for the per-rank binary traces written by the PMPI library (elasticity/pmpi/mc_pmpi.c).

The layout is defined once, in the C source's header comment; this module mirrors it and refuses
anything that does not match, naming the file, so that a truncated or foreign file never turns
into silently wrong duty cycles.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from elasticity.errors import ElasticityError

MAGIC = b"MCPMPITR"
VERSION = 1
NAME_BYTES = 24
# magic, version, header_bytes, record_bytes, n_calls, rank, size, pid, flags, signal, clock_id,
# t_init_start, t_init_end, t_finalize, n_events, n_dropped, hostname, jobid
_HEADER = struct.Struct("<8sIIIIiiiIiIQQQQQ64s64s")
HEADER_BYTES = _HEADER.size  # 216
RECORD_BYTES = 16
_RAW_DTYPE = np.dtype([("t_enter", "<u8"), ("dur_call", "<u8")])

#: dtype of RankTrace.events: one row per intercepted call, times in ns (CLOCK_MONOTONIC).
EVENT_DTYPE = np.dtype([("call", "<i2"), ("t_enter", "<i8"), ("t_exit", "<i8")])

FLAG_FINALIZED = 0x01
FLAG_SIGNAL = 0x02
FLAG_ATEXIT = 0x04
FLAG_ABORT = 0x08
FLAG_TRUNCATED = 0x10
FLAG_INFLIGHT = 0x20
FLAG_THREAD_MULTIPLE = 0x40
FLAG_ITERATIONS = 0x80  # written after MC_PMPI_ITERATIONS boundary calls, not at the end

_FILE_RE = re.compile(r"^pmpi\.(?P<job>[A-Za-z0-9._-]+)\.(?P<rank>\d+)\.bin$")


class TraceFormatError(ElasticityError, ValueError):
    """A trace file is truncated, corrupt, of another version, or inconsistent with its job."""


@dataclass(frozen=True)
class RankTrace:
    """One rank's trace: header facts plus the event array (sorted by t_enter)."""

    path: Path
    rank: int
    size: int
    pid: int
    hostname: str
    jobid: str
    flags: int
    signal: int
    t_init_start: int
    t_init_end: int
    t_finalize: int
    n_dropped: int
    call_names: tuple[str, ...]
    events: np.ndarray

    @property
    def finalized(self) -> bool:
        """True when the rank reached MPI_Finalize (not killed, aborted or exited early)."""
        return bool(self.flags & FLAG_FINALIZED)

    @property
    def truncated(self) -> bool:
        """True when events were dropped (MC_PMPI_MAX_EVENTS reached or out of memory)."""
        return bool(self.flags & FLAG_TRUNCATED) or self.n_dropped > 0

    def call_id(self, name: str) -> int:
        """The id of an MPI call name in this file; KeyError names the calls that exist."""
        try:
            return self.call_names.index(name)
        except ValueError:
            raise KeyError(f"{name!r} is not an intercepted call; known: {', '.join(self.call_names)}") from None


def _cstr(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode("utf-8", "replace")


def parse_trace(data: bytes, path: Path | str = "<bytes>") -> RankTrace:
    """Parse one trace from bytes; raises TraceFormatError naming `path` on any inconsistency."""
    path = Path(path)

    def bad(why: str) -> TraceFormatError:
        return TraceFormatError(f"{path}: {why}")

    if len(data) < HEADER_BYTES:
        raise bad(f"truncated header ({len(data)} bytes, need {HEADER_BYTES})")
    (
        magic,
        version,
        header_bytes,
        record_bytes,
        n_calls,
        rank,
        size,
        pid,
        flags,
        signo,
        _clock_id,
        t_init_start,
        t_init_end,
        t_finalize,
        n_events,
        n_dropped,
        hostname,
        jobid,
    ) = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise bad(f"not a PMPI trace (magic {magic!r}, expected {MAGIC!r})")
    if version != VERSION:
        raise bad(f"unsupported trace version {version} (this reader knows {VERSION})")
    if record_bytes != RECORD_BYTES:
        raise bad(f"record size {record_bytes}, expected {RECORD_BYTES}")
    if header_bytes != HEADER_BYTES + n_calls * NAME_BYTES:
        raise bad(f"header size {header_bytes} does not match {n_calls} call names")
    if not 0 <= rank < size:
        raise bad(f"rank {rank} outside communicator size {size}")
    expected = header_bytes + n_events * RECORD_BYTES
    if len(data) != expected:
        raise bad(f"truncated or corrupt: {len(data)} bytes, header promises {expected} ({n_events} events)")

    names = tuple(
        _cstr(data[HEADER_BYTES + i * NAME_BYTES : HEADER_BYTES + (i + 1) * NAME_BYTES]) for i in range(n_calls)
    )
    raw = np.frombuffer(data, dtype=_RAW_DTYPE, count=n_events, offset=header_bytes)
    events = np.empty(n_events, dtype=EVENT_DTYPE)
    events["call"] = (raw["dur_call"] & np.uint64(0xFF)).astype(np.int16)
    events["t_enter"] = raw["t_enter"].astype(np.int64)
    events["t_exit"] = events["t_enter"] + (raw["dur_call"] >> np.uint64(8)).astype(np.int64)
    if n_events and int(events["call"].max()) >= n_calls:
        raise bad(f"event call id {int(events['call'].max())} outside the {n_calls}-entry call table")
    if n_events and (int(events["t_enter"].min()) < t_init_start or int(events["t_exit"].max()) > t_finalize):
        raise bad("event times fall outside [MPI_Init, end of trace]: corrupt")
    events = events[np.argsort(events["t_enter"], kind="stable")]
    return RankTrace(
        path=path,
        rank=rank,
        size=size,
        pid=pid,
        hostname=_cstr(hostname),
        jobid=_cstr(jobid),
        flags=flags,
        signal=signo,
        t_init_start=t_init_start,
        t_init_end=t_init_end,
        t_finalize=t_finalize,
        n_dropped=n_dropped,
        call_names=names,
        events=events,
    )


def read_trace(path: Path | str) -> RankTrace:
    """Read one rank's trace file."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TraceFormatError(f"{path}: cannot read trace: {exc.strerror or exc}") from exc
    return parse_trace(data, path)


def find_trace_files(directory: Path | str, jobid: str | None = None) -> dict[str, list[Path]]:
    """Trace files in `directory` grouped by job id (only `jobid` when given)."""
    groups: dict[str, list[Path]] = {}
    for p in sorted(Path(directory).iterdir()):
        m = _FILE_RE.match(p.name)
        if m and (jobid is None or m["job"] == jobid):
            groups.setdefault(m["job"], []).append(p)
    return groups


def read_job_traces(source: Path | str | Iterable[Path | str], jobid: str | None = None) -> list[RankTrace]:
    """All ranks of one job, sorted by rank, checked for completeness and consistency.

    `source` is a directory (it must then hold exactly one job, or pass `jobid`) or a list of files.
    """
    if isinstance(source, (str, Path)) and Path(source).is_dir():
        groups = find_trace_files(source, jobid)
        if not groups:
            which = f" for job {jobid!r}" if jobid else ""
            raise TraceFormatError(f"{source}: no pmpi.<job>.<rank>.bin trace files{which}")
        if len(groups) > 1:
            raise TraceFormatError(f"{source}: traces of several jobs ({', '.join(sorted(groups))}); pick one")
        paths: list[Path] = next(iter(groups.values()))
    elif isinstance(source, (str, Path)):
        paths = [Path(source)]
    else:
        paths = [Path(p) for p in source]
    traces = sorted((read_trace(p) for p in paths), key=lambda t: t.rank)
    if not traces:
        raise TraceFormatError("no trace files given")
    size = traces[0].size
    for t in traces:
        if t.size != size:
            raise TraceFormatError(f"{t.path}: communicator size {t.size}, but {traces[0].path} says {size}")
    ranks = [t.rank for t in traces]
    if len(set(ranks)) != len(ranks):
        dup = sorted({r for r in ranks if ranks.count(r) > 1})
        raise TraceFormatError(f"duplicate traces for rank(s) {dup}")
    missing = sorted(set(range(size)) - set(ranks))
    if missing:
        raise TraceFormatError(f"job of {size} ranks is missing traces for rank(s) {missing}")
    return traces


def encode_trace(
    rank: int,
    size: int,
    events: np.ndarray,
    call_names: tuple[str, ...],
    *,
    t_init_start: int = 0,
    t_init_end: int = 0,
    t_finalize: int | None = None,
    flags: int = FLAG_FINALIZED,
    hostname: str = "localhost",
    jobid: str = "synthetic",
    pid: int = 0,
    signal: int = 0,
    n_dropped: int = 0,
) -> bytes:
    """The bytes the C library would write for these events (EVENT_DTYPE): synthetic traces for
    tests and the scheduling simulator use exactly the production reader."""
    ev = np.asarray(events, dtype=EVENT_DTYPE)
    if t_finalize is None:
        t_finalize = int(ev["t_exit"].max()) if ev.size else t_init_end
    header = _HEADER.pack(
        MAGIC,
        VERSION,
        HEADER_BYTES + len(call_names) * NAME_BYTES,
        RECORD_BYTES,
        len(call_names),
        rank,
        size,
        pid,
        flags,
        signal,
        1,  # CLOCK_MONOTONIC on Linux
        t_init_start,
        t_init_end,
        t_finalize,
        ev.size,
        n_dropped,
        hostname.encode()[:63],
        jobid.encode()[:63],
    )
    names = b"".join(n.encode()[: NAME_BYTES - 1].ljust(NAME_BYTES, b"\0") for n in call_names)
    raw = np.empty(ev.size, dtype=_RAW_DTYPE)
    raw["t_enter"] = ev["t_enter"].astype(np.uint64)
    raw["dur_call"] = ((ev["t_exit"] - ev["t_enter"]).astype(np.uint64) << np.uint64(8)) | ev["call"].astype(np.uint64)
    return header + names + raw.tobytes()
