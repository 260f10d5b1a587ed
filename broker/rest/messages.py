"""Validation errors in plain words: what a pydantic error means for the person who sent the value.

pydantic's own texts ("Input should be a valid integer, unable to parse string as an integer") describe the
validator, not the field; every message the REST API and the pages show goes through `reason` instead, so a
client sees "num_tasks: must be a whole number" and never a library's wording.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pydantic_core import ErrorDetails

VALUE_ERROR_PREFIX = "Value error, "  # pydantic's prefix on a ValueError raised by our own validators

_FIXED = {
    "missing": "is required",
    "extra_forbidden": "is not a known field",
    "int_parsing": "must be a whole number",
    "int_type": "must be a whole number",
    "int_from_float": "must be a whole number",
    "float_parsing": "must be a number",
    "float_type": "must be a number",
    "finite_number": "must be a finite number",
    "bool_parsing": "must be true or false",
    "bool_type": "must be true or false",
    "string_type": "must be text",
    "string_unicode": "must be text",
    "list_type": "must be a list",
    "dict_type": "must be an object",
    "json_invalid": "is not valid JSON",
    "model_type": "must be an object",
}


def reason(error: ErrorDetails) -> str:
    """One pydantic error (an `ErrorDetails`) as a reason in words, without the field's name."""
    kind = str(error.get("type", ""))
    context = error.get("ctx") or {}
    if kind == "value_error":  # raised by our validators: their text is already meant for people
        return str(error.get("msg", "")).removeprefix(VALUE_ERROR_PREFIX)
    if kind in _FIXED:
        return _FIXED[kind]
    bounds = {
        "greater_than_equal": ("must be at least", "ge"),
        "greater_than": ("must be more than", "gt"),
        "less_than_equal": ("must be at most", "le"),
        "less_than": ("must be less than", "lt"),
        "string_too_long": ("must be at most {} characters long", "max_length"),
        "string_too_short": ("must be at least {} characters long", "min_length"),
        "too_long": ("must have at most {} items", "max_length"),
        "too_short": ("must have at least {} items", "min_length"),
    }
    if kind in bounds and bounds[kind][1] in context:
        words, key = bounds[kind]
        limit = context[key]
        return words.format(limit) if "{}" in words else f"{words} {limit}"
    return "has a value that is not accepted here"


def field_name(error: ErrorDetails, skip: Iterable[str] = ()) -> str:
    """The field an error is about: the first part of its location that is not a location kind ("query")."""
    parts = [str(part) for part in error.get("loc", ()) if str(part) not in set(skip)]
    return parts[0] if parts else "body"


def error_lines(errors: Iterable[ErrorDetails], overrides: Mapping[str, str] | None = None) -> list[str]:
    """ "field: reason" lines, each once (a union reports one field once per member)."""
    lines = []
    for error in errors:
        kind = str(error.get("type", ""))
        text = (overrides or {}).get(kind) or reason(error)
        lines.append(f"{field_name(error, skip=('query', 'path', 'body', 'header', 'cookie'))}: {text}")
    return list(dict.fromkeys(lines))
