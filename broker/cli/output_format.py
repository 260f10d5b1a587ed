"""Flux's `-o/--format` dialect for table commands: Python format fields over an item's attributes, a header row
made from the fields' headings, and Flux's own additions, so format strings written for flux-core work here.

The additions: a field prefixed `?:` is dropped when it is empty for every row, `+:` widens it to its widest value
(and at least its heading), `?+:` does both; a spec ending in `+` marks a truncated value with a trailing `+`;
one ending in `h` prints `-` for an empty value.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from broker.errors import InputError

SENTINELS = ("?+:", "?:", "+:")  # longest first: `?+:` also ends with `+:`
_FILTER = ("?+:", "?:")
_EXPAND = ("?+:", "+:")
EMPTY = ("", "0s", "0.0", "0:00:00", "1970-01-01T00:00:00")  # values Flux treats as empty
_SPEC = re.compile(
    r"(?:(?P<fill>[\s\S])?(?P<align>[<>=^]))?(?P<sign>[- +])?(?P<z>z)?(?P<alt>#)?(?P<zero>0)?(?P<width>\d+)?"
    r"(?P<grouping>[_,])?(?:\.(?P<precision>\d+))?(?P<type>[bcdeEfFgGnosxX%])?(?P<hyphen>h)?(?P<truncate>\+)?"
)


class FormatError(InputError):
    """A format string naming a field the command does not have, or not parseable at all."""


@dataclass
class _Spec:
    """A format spec split into its parts, so the width can be changed and the spec rebuilt."""

    parts: dict[str, str]

    @classmethod
    def parse(cls, spec: str) -> _Spec:
        match = _SPEC.fullmatch(spec)
        return cls({k: v or "" for k, v in match.groupdict().items()} if match else {})

    @property
    def width(self) -> int:
        return int(self.parts.get("width") or 0)

    def widen(self, width: int) -> None:
        """Set the width; a string's precision grows with it, so the wider column is not cut short."""
        self.parts["width"] = str(width)
        precision = int(self.parts.get("precision") or 0)
        if self.parts.get("type", "") in ("", "s") and precision and precision < width:
            self.parts["precision"] = str(width)

    def header(self) -> str:
        return f"{self.parts.get('align', '')}{self.parts.get('width', '')}"

    def __str__(self) -> str:
        p = self.parts
        precision = f".{p['precision']}" if p.get("precision") else ""
        return (
            f"{p.get('fill', '')}{p.get('align', '')}{p.get('sign', '')}{p.get('z', '')}{p.get('alt', '')}"
            f"{p.get('zero', '')}{p.get('width', '')}{p.get('grouping', '')}{precision}{p.get('type', '')}"
            f"{p.get('hyphen', '')}{p.get('truncate', '')}"
        )


class _Formatter(string.Formatter):
    """Python's formatter with Flux's `+` (mark truncation) and `h` (dash for empty) spec suffixes."""

    def format_field(self, value: Any, format_spec: str) -> str:
        mark = format_spec.endswith("+")
        if mark:
            format_spec = format_spec[:-1]
        if format_spec.endswith("h"):
            value = "-" if str(value) in EMPTY else str(value)
            format_spec = format_spec[:-1] + "s"
        text: str = super().format_field(value, format_spec)
        if mark and len(text) < len(str(value)):
            text = text[:-1] + "+"
        return text


class _HeaderFormatter(_Formatter):
    """Looks a field's heading up by its whole (dotted) name instead of following attributes."""

    # open: string.Formatter.get_field's own signature
    def get_field(self, field_name: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        return kwargs[field_name], field_name


Entry = list[str]  # [literal text, field, spec, conversion], "" for absent parts


class OutputFormat:
    """One parsed format string and the headings of the fields it may name."""

    def __init__(self, fmt: str, headings: Mapping[str, str]) -> None:
        self.headings = headings
        try:
            self.entries: list[Entry] = [[s or "" for s in t] for t in string.Formatter().parse(fmt)]
        except ValueError as exc:
            raise FormatError(f"invalid format {fmt!r}: {exc}") from None
        for _, field, _, _ in self.entries:
            if field and field not in headings:
                raise FormatError(f"Unknown format field: {field}")

    @staticmethod
    def _join(entries: Iterable[Entry], header: bool = False) -> str:
        out = []
        for text, field, spec, conv in entries:
            if not field:
                out.append(text)
                continue
            name = field if header else f"0.{field}"
            spec = _Spec.parse(spec).header() if header else spec
            out.append(f"{text}{{{name}{'!' + conv if conv and not header else ''}{':' + spec if spec else ''}}}")
        return "".join(out)

    def without(self, fields: Iterable[str], nullify_expansion: bool = False) -> OutputFormat:
        """A copy without `fields` (their literal text kept unless it is only space or a sentinel); with
        nullify_expansion, `+:` fields lose their spec (for comparing rows regardless of widths)."""
        drop = set(fields)
        kept: list[Entry] = []
        for text, field, spec, conv in self.entries:
            if field in drop:
                if text.strip() and text.strip() not in SENTINELS:
                    kept.append([text, "", "", ""])
                continue
            if nullify_expansion and text.endswith("+:"):
                text, spec = "", ""
            kept.append([text, field, spec, conv])
        copy = OutputFormat("", self.headings)
        copy.entries = kept
        return copy

    def format(self, item: Any) -> str:
        return _Formatter().format(self._join(self.entries), item)

    def header(self) -> str:
        return _HeaderFormatter().format(self._join(self.entries, header=True), **self.headings)

    def resolved(self, items: Sequence[Any], no_header: bool = False) -> OutputFormat:
        """The format with its sentinels applied to these rows: empty `?:` fields gone, `+:` fields widened."""
        entries = [list(entry) for entry in self.entries]
        drop: set[int] = set()
        formatter = _Formatter()
        for index, (text, field, spec, conv) in enumerate(entries):
            sentinel = next((s for s in SENTINELS if text.endswith(s)), None)
            if sentinel is None or not field:
                continue
            parsed = _Spec.parse(spec)
            bare = f"{{0.{field}{'!' + conv if conv else ''}}}"
            widths = [len(v) for v in (formatter.format(bare, item) for item in items) if v not in EMPTY]
            if sentinel in _FILTER and not widths:
                drop.add(index)
                continue
            if sentinel in _EXPAND:
                heading = 0 if no_header else len(self.headings.get(field, ""))
                parsed.widen(max([parsed.width, heading, *widths]))
                entries[index][2] = str(parsed)
        result = OutputFormat("", self.headings)
        result.entries = [entry for index, entry in enumerate(entries) if index not in drop]
        for entry in result.entries:
            for sentinel in SENTINELS:
                entry[0] = entry[0].replace(sentinel, "")
        return result

    def render(self, items: Sequence[Any], no_header: bool = False) -> list[str]:
        """The lines Flux's print_items prints: a header unless no_header, then one per non-blank row."""
        final = self.resolved(items, no_header)
        lines = [] if no_header else [final.header()]
        lines += [line for line in (final.format(item) for item in items) if line and not line.isspace()]
        return lines
