"""The bursts of one MiniCluster in a small JSON file, shared by the burst service and `minicluster burst` /
`minicluster status`: each burst's record and why each waiting job waits, read-modify-written under a lock.

Split from service.py, which imports BurstRecord and StateFile from here.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TypedDict, cast

from bursting.plugin import Burst
from common import atomic


@dataclass
class BurstRecord:
    """A burst as the state file keeps it."""

    name: str
    nodes: int
    plugin: str
    ranks: list[int]
    lead_hosts: list[str]
    lead_address: str = ""
    lead_port: int = 8050
    state: str = "launching"
    """launching | up | failed | released"""
    reason: str = ""
    idle_since: float | None = None
    job: int | None = None
    manual: bool = False
    used: bool = False
    launched_at: float = 0.0
    """A job has run on it; a burst made by hand idles only after that (or goes with `--release`)."""

    def burst(self) -> Burst:
        return Burst(self.name, self.nodes, self.plugin, tuple(self.lead_hosts), self.lead_address, self.lead_port)


class BurstRecordDoc(TypedDict, total=False):
    """A BurstRecord in the state file (every field; older files may lack the later ones)."""

    name: str
    nodes: int
    plugin: str
    ranks: list[int]
    lead_hosts: list[str]
    lead_address: str
    lead_port: int
    state: str
    reason: str
    idle_since: float | None
    job: int | None
    manual: bool
    used: bool
    launched_at: float


class BurstStateDoc(TypedDict, total=False):
    """The state file: bursts by name, and why each waiting job still waits."""

    bursts: dict[str, BurstRecordDoc]
    pending: dict[str, str]


@dataclass
class BurstState:
    bursts: dict[str, BurstRecord] = field(default_factory=dict)
    pending: dict[str, str] = field(default_factory=dict)
    """job id -> why it still waits (what `minicluster status` shows)."""

    def to_json(self) -> BurstStateDoc:
        return {
            "bursts": {k: cast("BurstRecordDoc", asdict(v)) for k, v in self.bursts.items()},
            "pending": self.pending,
        }

    @classmethod
    def from_json(cls, data: BurstStateDoc) -> BurstState:
        bursts = {k: BurstRecord(**v) for k, v in (data.get("bursts") or {}).items()}
        return cls(bursts, dict(data.get("pending") or {}))


class StateFile:
    """The bursts of one MiniCluster on disk, read-modify-written under a lock (service and CLI share it)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> BurstState:
        try:
            return BurstState.from_json(json.loads(self.path.read_text()))
        except (OSError, ValueError):
            return BurstState()

    @contextlib.contextmanager
    def update(self) -> Iterator[BurstState]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_suffix(".lock"), "a+") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            state = self.read()
            yield state
            atomic.write_json(self.path, state.to_json())
