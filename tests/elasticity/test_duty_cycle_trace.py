"""The binary trace reader: round trips, and clear errors for truncated, corrupt or incomplete traces."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elasticity.profiling.trace import (
    EVENT_DTYPE,
    FLAG_SIGNAL,
    HEADER_BYTES,
    TraceFormatError,
    encode_trace,
    parse_trace,
    read_job_traces,
    read_trace,
)

CALLS = ("MPI_Barrier", "MPI_Allreduce")


def sample(rank: int = 0, size: int = 2, jobid: str = "j1", **kw: object) -> bytes:
    ev = np.array([(1, 100, 150), (0, 160, 200), (0, 300, 10**12)], dtype=EVENT_DTYPE)
    return encode_trace(rank, size, ev, CALLS, t_init_start=10, t_init_end=50, jobid=jobid, **kw)  # type: ignore[arg-type]


def write_job(directory: Path, jobid: str, size: int, ranks: list[int] | None = None) -> None:
    for r in range(size) if ranks is None else ranks:
        (directory / f"pmpi.{jobid}.{r}.bin").write_bytes(sample(r, size, jobid))


def test_round_trip_keeps_every_field(tmp_path: Path) -> None:
    path = tmp_path / "pmpi.j1.1.bin"
    path.write_bytes(sample(rank=1, hostname="pod-1", pid=42, flags=FLAG_SIGNAL, signal=15, n_dropped=3))
    t = read_trace(path)
    assert (t.rank, t.size, t.hostname, t.pid, t.jobid, t.signal) == (1, 2, "pod-1", 42, "j1", 15)
    assert t.call_names == CALLS and not t.finalized and t.truncated
    assert (t.t_init_start, t.t_init_end, t.t_finalize) == (10, 50, 10**12)
    assert t.events["call"].tolist() == [1, 0, 0]
    assert t.events["t_enter"].tolist() == [100, 160, 300]
    assert t.events["t_exit"].tolist() == [150, 200, 10**12]  # durations beyond 32 bits survive


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda b: b[:100], "truncated header"),
        (lambda b: b[:-5], "truncated or corrupt"),
        (lambda b: b + b"\0" * 16, "truncated or corrupt"),
        (lambda b: b"NOTATRCE" + b[8:], "not a PMPI trace"),
        (lambda b: b[:8] + struct.pack("<I", 99) + b[12:], "unsupported trace version 99"),
        (lambda b: b[:24] + struct.pack("<ii", 5, 2) + b[32:], "rank 5 outside communicator size 2"),
        (lambda b: b[: HEADER_BYTES + 48 + 8] + b"\x07" + b[HEADER_BYTES + 48 + 9 :], "call id 7 outside"),
    ],
)
def test_corrupt_files_are_named_and_explained(tmp_path: Path, mutate: object, message: str) -> None:
    path = tmp_path / "pmpi.bad.0.bin"
    path.write_bytes(mutate(sample()))  # type: ignore[operator]
    with pytest.raises(TraceFormatError, match=message) as exc:
        read_trace(path)
    assert str(path) in str(exc.value)


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_any_truncation_is_a_trace_format_error(data: st.DataObject) -> None:
    blob = sample()
    cut = data.draw(st.integers(0, len(blob) - 1))
    with pytest.raises(TraceFormatError, match=r"x\.bin"):
        parse_trace(blob[:cut], "x.bin")


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(TraceFormatError, match="cannot read trace"):
        read_trace(tmp_path / "missing.bin")


def test_job_directory_checks(tmp_path: Path) -> None:
    write_job(tmp_path, "a", 3)
    assert [t.rank for t in read_job_traces(tmp_path)] == [0, 1, 2]

    write_job(tmp_path, "b", 3, ranks=[0, 2])
    with pytest.raises(TraceFormatError, match="several jobs"):
        read_job_traces(tmp_path)
    with pytest.raises(TraceFormatError, match=r"missing traces for rank\(s\) \[1\]"):
        read_job_traces(tmp_path, jobid="b")
    with pytest.raises(TraceFormatError, match="no pmpi"):
        read_job_traces(tmp_path, jobid="nope")

    other = tmp_path / "other"
    other.mkdir()
    (other / "x.bin").write_bytes(sample(0, 2))
    (other / "y.bin").write_bytes(sample(1, 3))
    with pytest.raises(TraceFormatError, match="communicator size 3"):
        read_job_traces([other / "x.bin", other / "y.bin"])
    (other / "z.bin").write_bytes(sample(0, 2))
    with pytest.raises(TraceFormatError, match=r"duplicate traces for rank\(s\) \[0\]"):
        read_job_traces([other / "x.bin", other / "z.bin"])
