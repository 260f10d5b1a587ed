"""Broker attributes given as `-Sname=value` (Flux's spelling) and typed access to them."""

from __future__ import annotations

import math
from collections.abc import Iterable

from .errors import InputError
from .fsd import parse_fsd

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


class AttrError(InputError):
    """A malformed `-S` option or attribute value."""


def parse_duration(text: str) -> float:
    """A Flux Standard Duration ("5s", "100ms", "1.5m", "2h", "1d", bare number = seconds) in seconds."""
    try:
        return parse_fsd(text)
    except ValueError as exc:
        raise AttrError(f"invalid duration: {exc}") from None


def parse_setattr(option: str) -> tuple[str, str]:
    """'name=value' (the text after -S) -> (name, value)."""
    name, sep, value = option.partition("=")
    name = name.strip()
    if not sep or not name:
        raise AttrError(f"invalid attribute option {option!r} (expected -Sname=value)")
    return name, value


class Attributes:
    """Broker attributes: the user's -S settings plus values the broker sets itself (rank, size...)."""

    def __init__(self, settings: Iterable[tuple[str, str]] = ()) -> None:
        self._values: dict[str, str] = {}
        for name, value in settings:
            self._values[name] = value

    def __contains__(self, name: object) -> bool:
        return name in self._values

    def set(self, name: str, value: object) -> None:
        self._values[name] = str(value)

    def get(self, name: str, default: str | None = None) -> str | None:
        return self._values.get(name, default)

    def items(self) -> list[tuple[str, str]]:
        return sorted(self._values.items())

    def as_dict(self) -> dict[str, str]:
        return dict(self._values)

    def duration(self, name: str, default: float) -> float:
        value = self._values.get(name)
        if value is None:
            return default
        try:
            seconds = parse_duration(value)
        except AttrError as exc:
            raise AttrError(f"attribute {name}: {exc}") from None
        if seconds <= 0 or not math.isfinite(seconds):
            raise AttrError(f"attribute {name}: duration must be positive and finite, got {value!r}")
        return seconds

    def integer(self, name: str, default: int | None, minimum: int = 0) -> int | None:
        value = self._values.get(name)
        if value is None:
            return default
        try:
            number = int(value, 10)
        except ValueError:
            raise AttrError(f"attribute {name}: expected an integer, got {value!r}") from None
        if number < minimum:
            raise AttrError(f"attribute {name}: must be >= {minimum}, got {number}")
        return number

    def boolean(self, name: str, default: bool) -> bool:
        value = self._values.get(name)
        if value is None:
            return default
        lowered = value.strip().lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        raise AttrError(f"attribute {name}: expected a boolean (0/1/true/false), got {value!r}")
