"""Compact JSON text for what the broker writes on every message and journal line: orjson, 5-10x the standard
library's encoder (a submit writes the jobspec twice, a job's life ten events), with json's own behaviour kept
where orjson's differs: integer keys become strings, and what orjson refuses (integers beyond 64 bits) falls back
to the standard library rather than failing."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import orjson

_OPTIONS = orjson.OPT_NON_STR_KEYS


def dumps_bytes(value: Any) -> bytes:
    """UTF-8 JSON, no spaces."""
    try:
        return orjson.dumps(value, option=_OPTIONS)
    except TypeError:
        return json.dumps(value, separators=(",", ":")).encode()


def dumps(value: Any) -> str:
    """The same, as text (journal lines, kept encoded views)."""
    return dumps_bytes(value).decode()


_LINE = _OPTIONS | orjson.OPT_APPEND_NEWLINE


def lines(values: Iterable[Any]) -> str:
    """Each value as one line of the same JSON, all as one text (a journal batch: one decode, not one a line)."""
    encoded = []
    for value in values:
        try:
            encoded.append(orjson.dumps(value, option=_LINE))
        except TypeError:
            encoded.append(dumps_bytes(value) + b"\n")
    return b"".join(encoded).decode()
