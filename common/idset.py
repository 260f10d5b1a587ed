"""Flux idsets ("0-3,7"): the compact rank and core lists used in R, quorum and CLI output, and the kernel's CPU
list format (cpuset.cpus, `taskset -c`), which is the same text."""

from __future__ import annotations

from common.errors import IdsetError

TYPE_CHECKING = False  # `flux submit` loads this module: collections.abc costs its start-up 1.5 ms
if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["IdsetError", "count", "decode", "encode", "ranges"]


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
    return [i for first, last in ranges(text) for i in range(first, last + 1)]


def ranges(text: str) -> list[tuple[int, int]]:
    """The idset's ranges (first, last), sorted and merged, without listing its ids: `flux submit
    --cc=1-100000000` once built a set of 10**8 ids before its first submission (issue 41)."""
    text = text.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    if not text:
        return []
    parsed: list[tuple[int, int]] = []
    for part in text.split(","):
        lo, sep, hi = part.strip().partition("-")
        try:
            first = int(lo)
            last = int(hi) if sep else first
        except ValueError:
            raise IdsetError(f"invalid idset {text!r}") from None
        if first < 0 or last < first:
            raise IdsetError(f"invalid range {part!r} in idset {text!r}")
        parsed.append((first, last))
    merged: list[tuple[int, int]] = []
    for first, last in sorted(parsed):
        if merged and first <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], last))
        else:
            merged.append((first, last))
    return merged


def count(spans: list[tuple[int, int]]) -> int:
    """How many ids `ranges` holds."""
    return sum(last - first + 1 for first, last in spans)
