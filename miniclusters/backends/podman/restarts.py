"""RESTARTS that never go down: podman's RestartCount counts only its own restarts since the container was last
started by hand, and `podman start` sets it back to 0 (a lead killed, restarted by podman, then killed with
`podman kill` and started again went from 1 restart to 0). kubectl's RESTARTS only grows while the pod lives.

So each pod's container is remembered (by id) with podman's count and start time when last seen, and what podman
forgot: a count that went down, or a new start time with no new count, is a start by hand, itself a restart. A new
container id is a new pod (scaled down and up again): its count starts afresh, as a new pod's does. Restarts
between two looks that left no trace (two starts by hand) are counted once: never more than happened.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import NotRequired, TypedDict

from common import atomic
from miniclusters.backends.podman.observe import InspectedContainer

LEDGER_FILE = "restarts.json"
NEVER_STARTED = "0001-01-01T00:00:00Z"
"""podman's StartedAt of a container created and not started yet (Go's zero time)."""


class SeenJson(TypedDict):
    """A Seen as restarts.json keeps it (its fields)."""

    container: str
    started: str
    count: int
    forgotten: NotRequired[int]


@dataclass(frozen=True)
class Seen:
    """One pod's container as last seen."""

    container: str
    started: str
    """Its State.StartedAt."""
    count: int
    """podman's RestartCount."""
    forgotten: int = 0
    """Restarts podman no longer counts (before its count was set back by a start by hand, and those starts)."""

    @property
    def restarts(self) -> int:
        return self.forgotten + self.count

    def to_json(self) -> SeenJson:
        return {"container": self.container, "started": self.started, "count": self.count, "forgotten": self.forgotten}


def seen_of(container: InspectedContainer) -> tuple[str, str, int]:
    """(id, StartedAt, RestartCount) of a container's inspect document: what advance() reads."""
    state = container.get("State") or {}
    return str(container.get("Id", "")), str(state.get("StartedAt", "")), int(container.get("RestartCount") or 0)


def _started(value: str) -> bool:
    return bool(value) and value != NEVER_STARTED


def advance(last: Seen | None, container: str, started: str, count: int) -> Seen:
    """What is remembered after seeing the pod's container (id, StartedAt, RestartCount) now: pure."""
    if last is None or last.container != container:
        return Seen(container, started, count)
    if count < last.count:  # podman set its count back: started by hand (a restart), then `count` of its own
        return Seen(container, started, count, last.forgotten + last.count + 1)
    if count == last.count and started != last.started and _started(last.started):
        return Seen(container, started, count, last.forgotten + 1)  # started by hand, no restart of podman's
    return Seen(container, started, count, last.forgotten)


class RestartLedger:
    """The cluster's remembered containers, in one JSON file beside its record (not in the record: `status`
    writes this one, and must never write back a spec a concurrent `scale` has just changed)."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / LEDGER_FILE

    def _load(self) -> dict[int, Seen]:
        try:
            data = json.loads(self.path.read_text())
            return {int(index): Seen(**entry) for index, entry in data.items()}
        except (OSError, ValueError, TypeError):
            return {}

    def update(self, seen: dict[int, tuple[str, str, int]]) -> dict[int, int]:
        """Restarts by pod index, from (container id, StartedAt, RestartCount) of each pod whose container is
        seen now; the others are kept as they were (a pod that comes back recreated has a new container id)."""
        last = self._load()
        now = {**last, **{index: advance(last.get(index), *observed) for index, observed in seen.items()}}
        if now != last and self.path.parent.is_dir():
            document: dict[str, SeenJson] = {str(index): entry.to_json() for index, entry in sorted(now.items())}
            atomic.write_text(self.path, json.dumps(document, indent=1))
        return {index: now[index].restarts for index in seen}
