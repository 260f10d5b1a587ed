"""Counted nouns in what the CLI says: "1 pod", "2 pods" (one helper, so no message says "1 pods")."""

from __future__ import annotations


def plural(count: int, noun: str, many: str | None = None) -> str:
    """`count` and `noun`, in the plural unless count is 1 (`many` for a noun that does not just take an s)."""
    return f"{count} {noun if count == 1 else (many or noun + 's')}"


def of(part: int, whole: int, noun: str, many: str | None = None) -> str:
    """ "1/1 pod", "1/2 pods": a part of a whole, the noun agreeing with the whole."""
    return f"{part}/{plural(whole, noun, many)}"
