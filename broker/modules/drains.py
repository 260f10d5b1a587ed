"""Drained ranks with their reasons, as flux-core keeps them: who drained a rank, why and when.

A drained rank takes no new jobs; the jobs running on it finish. The reason is free text, so a controller
that drains ranks (the autoscaler) marks them with a reason of its own and later finds and undrains exactly
those, never a rank an operator drained by hand (`flux resource drain RANKS REASON`). The table is the one
owner of drain state in the job manager; the scheduler reads its ranks.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from broker.errors import InputError
from broker.payloads import DrainEntry

DrainMode = Literal["exact", "drain", "force", "update", "undrain", "replace"]
DRAIN_MODES: tuple[DrainMode, ...] = ("exact", "drain", "force", "update", "undrain", "replace")


class DrainError(InputError):
    """The request would drain a drained rank or undrain one that is not; nothing was changed."""


@dataclass(frozen=True)
class Drain:
    """Why and since when a rank is drained."""

    reason: str
    timestamp: float


class DrainTable:
    """rank -> Drain. Every change is all or nothing: a refused request leaves the table as it was."""

    def __init__(self) -> None:
        self.entries: dict[int, Drain] = {}

    @property
    def ranks(self) -> frozenset[int]:
        return frozenset(self.entries)

    def apply(self, mode: DrainMode, ranks: Iterable[int], reason: str, now: float) -> None:
        """Change the table as `flux resource drain/undrain` asks (see DRAIN_MODES):

        - ``drain``: drain RANKS; refused if any is drained already (flux-core without --force/--update);
        - ``force``: drain RANKS, replacing the reason of those drained already;
        - ``update``: drain those of RANKS not drained yet, leaving the others' reasons alone;
        - ``undrain``: undrain RANKS; refused if any is not drained;
        - ``replace``: the ranks drained for REASON become exactly RANKS (ranks drained for another reason keep
          it): how a controller converges its own drains without touching anyone else's;
        - ``exact``: the drained ranks become exactly RANKS (those already drained keep their reason).
        """
        wanted = sorted(set(ranks))
        if mode == "drain":
            already = [r for r in wanted if r in self.entries]
            if already:
                raise DrainError(
                    f"rank {already[0]} is already drained ({self.entries[already[0]].reason or 'no reason'})"
                )
        if mode == "undrain":
            missing = [r for r in wanted if r not in self.entries]
            if missing:
                raise DrainError(f"rank {missing[0]} is not drained")
            for rank in wanted:
                del self.entries[rank]
            return
        if mode == "replace":
            for rank in [r for r, d in self.entries.items() if d.reason == reason and r not in wanted]:
                del self.entries[rank]
            mode = "update"
        if mode == "exact":
            for rank in [r for r in self.entries if r not in wanted]:
                del self.entries[rank]
            mode = "update"
        for rank in wanted:
            if mode == "update" and rank in self.entries:
                continue
            self.entries[rank] = Drain(reason, now)

    def owned_by(self, reason: str) -> frozenset[int]:
        return frozenset(r for r, d in self.entries.items() if d.reason == reason)

    def as_json(self) -> dict[str, DrainEntry]:
        """{"<rank>": {"reason": ..., "timestamp": ...}} in rank order (the `drain` key of queue-state)."""
        return {str(r): {"reason": self.entries[r].reason, "timestamp": self.entries[r].timestamp}
                for r in sorted(self.entries)}  # fmt: skip


def describe(entries: dict[int, str]) -> str:
    """ "2-3 (autoscaler: ...), 5 (maintenance)": drained ranks grouped by reason, for pending reasons."""
    from common import idset

    by_reason: dict[str, list[int]] = {}
    for rank in sorted(entries):
        by_reason.setdefault(entries[rank], []).append(rank)
    parts = sorted(by_reason.items(), key=lambda item: item[1][0])
    return ", ".join(f"{idset.encode(ranks)} ({reason})" if reason else idset.encode(ranks) for reason, ranks in parts)
