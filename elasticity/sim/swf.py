"""Standard Workload Format reader: 18 whitespace-separated fields per job, ``;`` header comments, -1 unknown.

A malformed line raises :class:`SWFError` naming the file and line number; nothing is skipped silently.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from elasticity.errors import ElasticityError

FIELDS = (
    "job",
    "submit",
    "wait",
    "run_time",
    "allocated_procs",
    "avg_cpu_time",
    "used_memory",
    "requested_procs",
    "requested_time",
    "requested_memory",
    "status",
    "user",
    "group",
    "executable",
    "queue",
    "partition",
    "preceding_job",
    "think_time",
)
UNKNOWN = -1


class SWFError(ElasticityError, ValueError):
    pass


@dataclass(frozen=True, slots=True)
class SWFJob:
    """One line; every field as in the format, -1 where unknown."""

    job: int
    submit: float
    wait: float
    run_time: float
    allocated_procs: int
    avg_cpu_time: float
    used_memory: float
    requested_procs: int
    requested_time: float
    requested_memory: float
    status: int
    user: int
    group: int
    executable: int
    queue: int
    partition: int
    preceding_job: int
    think_time: float

    @property
    def size(self) -> int:
        """Requested processors (field 8), else allocated (field 5); -1 if neither is known."""
        return self.requested_procs if self.requested_procs > 0 else self.allocated_procs


@dataclass(frozen=True)
class SWFTrace:
    jobs: list[SWFJob]
    header: dict[str, str] = field(default_factory=dict)
    name: str = ""

    @property
    def machine_size(self) -> int | None:
        """MaxProcs from the header (job sizes are processors), else MaxNodes."""
        for key in ("MaxProcs", "MaxNodes"):
            value = self.header.get(key, "").split()
            if value and value[0].lstrip("-").isdigit() and int(value[0]) > 0:
                return int(value[0])
        return None


_INT_FIELDS = frozenset(
    {
        "job",
        "allocated_procs",
        "requested_procs",
        "status",
        "user",
        "group",
        "executable",
        "queue",
        "partition",
        "preceding_job",
    }
)


def _number(text: str, name: str, where: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise SWFError(f"{where}: field {name!r} is not a number: {text!r}") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise SWFError(f"{where}: field {name!r} is not a finite number: {text!r}")
    return value


def parse_swf(lines: Iterable[str], name: str = "<swf>") -> SWFTrace:
    header: dict[str, str] = {}
    jobs: list[SWFJob] = []
    for number, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith(";"):
            key, sep, value = line[1:].partition(":")
            if sep and key.strip() and " " not in key.strip():
                header.setdefault(key.strip(), value.strip())
            continue
        where = f"{name}:{number}"
        parts = line.split()
        if len(parts) != len(FIELDS):
            raise SWFError(f"{where}: expected {len(FIELDS)} fields, found {len(parts)}")
        values: dict[str, float | int] = {}
        for text, fname in zip(parts, FIELDS, strict=True):
            number_ = _number(text, fname, where)
            if fname in _INT_FIELDS:
                if number_ != int(number_):
                    raise SWFError(f"{where}: field {fname!r} must be an integer: {text!r}")
                values[fname] = int(number_)
            else:
                values[fname] = number_
        jobs.append(SWFJob(**values))  # type: ignore[arg-type]
    return SWFTrace(jobs, header, name)


def read_swf(path: str | Path) -> SWFTrace:
    path = Path(path)
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            return parse_swf(handle, path.name)
    except OSError as err:
        raise SWFError(f"{path}: cannot read: {err.strerror or err}") from None
