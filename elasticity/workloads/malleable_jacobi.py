"""The malleable Jacobi solver (malleable_jacobi.c): a real MPI job resized by checkpoint and restart.

A signal (SIGUSR1 by default) asks the running job to checkpoint at the next iteration boundary and exit; started
again with the same state directory on any number of ranks, it resumes from there, and its final answer (an
FNV-1a 64 digest of the grid) is bit-identical to a rigid run's. With pacing, its run time follows Amdahl's law on
a machine with fewer cores than ranks. This module builds it, writes its arguments and reads its state directory.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from elasticity.pmpi.build import compile_with_mpicc

SOURCE = Path(__file__).with_name("malleable_jacobi.c")
PROGRAM = "malleable_jacobi"
CFLAGS = ("-O2", "-Wall", "-Wextra", "-Werror")

MAX_GRID = 46340
"""The solver's limit: NX * NX cells must fit MPI's int counts."""
MAX_ITERATIONS = 1_000_000_000
MAX_PACE_MS = 3_600_000.0
SIGNALS = ("SIGUSR1", "SIGUSR2", "SIGHUP", "SIGINT", "SIGTERM", "SIGALRM")
"""The names --signal accepts (also without SIG). mpirun forwards SIGUSR1 and SIGUSR2 to its ranks; it ends the job
on the others, which suit launchers that signal the tasks themselves (`flux job kill --signal`)."""

CHECKPOINT_MAGIC = b"MJACOBI\0"
CHECKPOINT_VERSION = 1
CHECKPOINT_HEADER = struct.Struct("<8sQQQQ")
"""magic, version, grid NX, iterations done, total iterations; the NX * NX float64 interior follows (row-major)."""

STATUS_FILE = "status"
ANSWER_FILE = "answer"
PROGRESS_FILE = "progress"
CHECKPOINT_FILE = "checkpoint"


def build_malleable_jacobi(output_dir: Path | str | None = None, mpicc: str = "mpicc", force: bool = False) -> Path:
    """Compile the solver with the installed MPI wrapper (cached like the profiler library)."""
    return compile_with_mpicc(SOURCE, PROGRAM, CFLAGS, ("-lm",), output_dir, mpicc, force)


def _whole(value: object, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{name} must be an integer from {low} to {high}, not {value!r}")
    return value


def _number(value: object, name: str, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, not {value!r}")
    if not low <= value <= high:
        raise ValueError(f"{name} must be from {low:g} to {high:g}, not {value!r}")
    return float(value)


def signal_name(signal: str) -> str:
    """The SIG-prefixed name of one of SIGNALS ("USR2" -> "SIGUSR2"); ValueError naming `signal` otherwise."""
    name = signal if signal.startswith("SIG") else f"SIG{signal}"
    if name not in SIGNALS:
        raise ValueError(f"signal must be one of {', '.join(SIGNALS)}, not {signal!r}")
    return name


def jacobi_arguments(
    grid: int,
    iterations: int,
    state_dir: Path | str,
    pace_ms: float = 0.0,
    serial_fraction: float = 0.0,
    signal: str = "SIGUSR1",
) -> list[str]:
    """argv after the program. The same grid, iterations and state_dir on every restart resume one computation;
    the rank count (mpirun -np) is free, up to one rank per grid row."""
    _whole(grid, "grid", 1, MAX_GRID)
    _whole(iterations, "iterations", 1, MAX_ITERATIONS)
    if not str(state_dir):
        raise ValueError("state_dir must name a directory")
    pace = _number(pace_ms, "pace_ms", 0.0, MAX_PACE_MS)
    serial = _number(serial_fraction, "serial_fraction", 0.0, 1.0)
    return [
        "--grid", str(grid), "--iterations", str(iterations), "--state", str(state_dir),
        "--pace-ms", repr(pace), "--serial-fraction", repr(serial), "--signal", signal_name(signal),
    ]  # fmt: skip


@dataclass(frozen=True)
class JacobiStatus:
    """What the last run left in the state directory: finished, checkpointed (resumable), or nothing yet."""

    kind: Literal["done", "checkpoint", "none"]
    iterations: int


@dataclass(frozen=True)
class CheckpointHeader:
    """The checkpoint's header, for a controller deciding whether a restart can use it."""

    grid: int
    iterations_done: int
    total_iterations: int


def _read_text(path: Path) -> str | None:
    """The file's text, or None when it does not exist (the solver replaces files atomically: never half read)."""
    try:
        return path.read_text()
    except FileNotFoundError:
        return None


def read_status(state_dir: Path | str) -> JacobiStatus:
    """DIR/status: "done N" or "checkpoint K"; JacobiStatus("none", 0) when no run has ended yet."""
    path = Path(state_dir) / STATUS_FILE
    text = _read_text(path)
    if text is None:
        return JacobiStatus("none", 0)
    match text.split():
        case ["done", count] if count.isdigit():
            return JacobiStatus("done", int(count))
        case ["checkpoint", count] if count.isdigit():
            return JacobiStatus("checkpoint", int(count))
    raise ValueError(f"{path}: expected 'done N' or 'checkpoint K', found {text.strip()!r}")


def read_answer(state_dir: Path | str) -> str | None:
    """The FNV-1a 64 digest (16 hex digits) of a finished run's grid, or None before the run finishes."""
    path = Path(state_dir) / ANSWER_FILE
    text = _read_text(path)
    if text is None:
        return None
    for line in text.splitlines():
        match line.split():
            case ["fnv1a64", digest] if len(digest) == 16 and all(c in "0123456789abcdef" for c in digest):
                return digest
    raise ValueError(f"{path}: no 'fnv1a64 <16 hex digits>' line in {text.strip()!r}")


def read_progress(state_dir: Path | str) -> int:
    """Iterations done so far (updated every hundredth of the run), 0 before the solver has started."""
    path = Path(state_dir) / PROGRESS_FILE
    text = _read_text(path)
    if text is None:
        return 0
    if not text.strip().isdigit():
        raise ValueError(f"{path}: expected an iteration count, found {text.strip()!r}")
    return int(text)


def read_checkpoint_header(state_dir: Path | str) -> CheckpointHeader | None:
    """The header of DIR/checkpoint, or None when there is none; ValueError when it is not the solver's."""
    path = Path(state_dir) / CHECKPOINT_FILE
    try:
        with path.open("rb") as f:
            raw = f.read(CHECKPOINT_HEADER.size)
    except FileNotFoundError:
        return None
    if len(raw) != CHECKPOINT_HEADER.size:
        raise ValueError(f"{path}: short header ({len(raw)} bytes)")
    magic, version, grid, done, total = CHECKPOINT_HEADER.unpack(raw)
    if magic != CHECKPOINT_MAGIC or version != CHECKPOINT_VERSION:
        raise ValueError(f"{path}: not a version {CHECKPOINT_VERSION} malleable_jacobi checkpoint")
    return CheckpointHeader(grid, done, total)
