"""How deeply a JSON text nests, found without recursion and before any parser sees it (issue 41).

Why: Python's json module recurses once per level and raises RecursionError (a 500 from the REST server) near
1,000 levels; orjson refuses past 1,024; and a payload a parser did take can still break a later step (the
journal's encoder fell back to the standard library's on a 1,000-level jobspec and the lead broker died). So
text from outside is refused past MAX_DEPTH levels, a bound no real jobspec or REST body comes near.

The scan runs in C, never recursing: one regular expression cuts the strings out, `translate` keeps only the
brackets as +1 and -1, and `accumulate` runs the level along them (about 60 ms for a megabyte of brackets).
Text with no more opening brackets than the limit cannot nest past it and is not scanned at all (a submit)."""

from __future__ import annotations

import re
from itertools import accumulate

MAX_DEPTH = 64
"""Levels of arrays and objects a JSON text from outside may nest (`{"a": [1]}` nests 2)."""

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_STEPS = bytes.maketrans(b"[]{}", b"\x01\xff\x01\xff")  # as signed bytes: +1 in, -1 out
_NOT_BRACKET = bytes(set(range(256)) - set(b"[]{}"))


def json_depth(text: bytes) -> int:
    """The deepest level of arrays and objects in `text` (0 for a scalar). Brackets inside strings do not count;
    text that is not JSON gets a number for what it holds, and is left to the parser to refuse."""
    steps = _STRING.sub(b"", text).translate(_STEPS, _NOT_BRACKET)
    return max(accumulate(memoryview(steps).cast("b")), default=0)


def too_deep(text: bytes, limit: int = MAX_DEPTH) -> bool:
    """True when `text` nests more than `limit` levels; counting its opening brackets is enough to say no."""
    if text.count(b"[") + text.count(b"{") <= limit:
        return False
    return json_depth(text) > limit


def depth_problem(limit: int = MAX_DEPTH) -> str:
    """What an answer says about text refused by `too_deep`."""
    return f"JSON nested deeper than {limit} levels (arrays and objects)"
