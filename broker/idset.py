"""Flux idsets ("0-3,7"): the compact rank and core lists used in R, quorum and CLI output."""

from __future__ import annotations

from collections.abc import Iterable

from broker.errors import InputError


class IdsetError(InputError):
    """An idset string that does not parse."""


def encode(ids: Iterable[int]) -> str:
    """Sorted, de-duplicated ids as ranges: [0, 1, 2, 5] -> "0-2,5"."""
    values = sorted(set(ids))
    parts: list[str] = []
    start = prev = None
    for value in values:
        if start is None:
            start = prev = value
        elif prev is not None and value == prev + 1:
            prev = value
        else:
            parts.append(str(start) if start == prev else f"{start}-{prev}")
            start = prev = value
    if start is not None:
        parts.append(str(start) if start == prev else f"{start}-{prev}")
    return ",".join(parts)


def decode(text: str) -> list[int]:
    """Parse "0-2,5" (brackets allowed, as Flux prints "[0-2]") into a sorted list of ids."""
    text = text.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    ids: set[int] = set()
    if not text:
        return []
    for part in text.split(","):
        lo, sep, hi = part.strip().partition("-")
        try:
            first = int(lo)
            last = int(hi) if sep else first
        except ValueError:
            raise IdsetError(f"invalid idset {text!r}") from None
        if first < 0 or last < first:
            raise IdsetError(f"invalid range {part!r} in idset {text!r}")
        ids.update(range(first, last + 1))
    return sorted(ids)
