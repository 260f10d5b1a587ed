"""The bottom layer's one error root. Its kinds subclass the standard library's, so callers that catch
`ValueError` (a CLI flag parsed into an idset) keep working whichever layer they are in."""

from __future__ import annotations


class CommonError(Exception):
    """The root of every error the `common` package raises on purpose."""


class IdsetError(CommonError, ValueError):
    """An idset or CPU list that does not parse; the message quotes it."""
