"""Spec problems: every one carries the path of the field it is about."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from miniclusters.errors import MiniclustersError


@dataclass(frozen=True, order=True)
class Problem:
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class SpecError(MiniclustersError, ValueError):
    """A MiniCluster that cannot be accepted; lists every problem found, each with its field path."""

    def __init__(self, problems: Iterable[Problem], source: str | None = None) -> None:
        unique: list[Problem] = []
        for problem in problems:
            if problem not in unique:
                unique.append(problem)
        self.problems: Sequence[Problem] = unique
        self.source = source
        where = f"{source}: " if source else ""
        count = len(unique)
        lines = [f"{where}invalid MiniCluster ({count} problem{'s' if count != 1 else ''}):"]
        lines += [f"  - {p}" for p in unique]
        super().__init__("\n".join(lines))


def join_path(*parts: str | int) -> str:
    """`spec`, `containers`, 0, `runFlux` -> `spec.containers[0].runFlux`."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif out:
            out += f".{part}"
        else:
            out = part
    return out
