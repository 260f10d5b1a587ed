"""JSON for the job CLI's lean path, on the standard library's C codec (`_json`) without the `json` package.

Why: `import json` loads `re`, and `re` loads `enum`; together about 15 ms of a `flux run true` that takes 25 here
(issue 27: `flux run true` within 20 ms, CLI start-up included). `_json` is what `json` itself runs on; this module
builds its scanner and encoder the way json.decoder and json.encoder do, with the same results as
`json.loads(text)` and `json.dumps(value, separators=(",", ":"))`. An interpreter whose `_json` differs gets the
`json` package instead (FALLBACK says which one this is).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

_CONSTANTS = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}
_WHITESPACE = " \t\n\r"


class _Context:
    """The attributes `_json.make_scanner` reads from its json.JSONDecoder."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = _CONSTANTS.__getitem__


def _unserializable(value: object) -> object:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _c_codec() -> tuple[Callable[[str, int], tuple[Any, int]], Callable[[Any, int], Any], Callable[[Any, int], Any]]:
    import _json

    scanner = _json.make_scanner(_Context())  # type: ignore[arg-type]  # typeshed asks for a JSONDecoder
    separators = (":", ",", False, False)  # key and item separators, sort_keys, skipkeys
    encoder = _json.make_encoder(None, _unserializable, _json.encode_basestring_ascii, None, *separators, True)
    strict = _json.make_encoder(None, _unserializable, _json.encode_basestring_ascii, None, *separators, False)
    if scanner('{"a":[1,2.5,"\\u00e9",null]}', 0) != ({"a": [1, 2.5, "é", None]}, 27):
        raise ImportError("_json's scanner answers differently")
    if "".join(encoder({"a": [1, "é"]}, 0)) != '{"a":[1,"\\u00e9"]}':
        raise ImportError("_json's encoder answers differently")
    return scanner, encoder, strict


try:
    _scan, _encode, _encode_strict = _c_codec()
    FALLBACK = False
except (ImportError, AttributeError, TypeError):
    FALLBACK = True


def loads(data: bytes | str) -> Any:
    """json.loads: ValueError for anything that is not one JSON value (whitespace around it aside)."""
    text = data.decode() if isinstance(data, bytes | bytearray) else data
    if FALLBACK:
        import json

        return json.loads(text)
    start = len(text) - len(text.lstrip(_WHITESPACE))
    try:
        value, end = _scan(text, start)
    except StopIteration as stop:
        raise ValueError(f"not JSON at character {stop.value}") from None
    if text[end:].strip(_WHITESPACE):
        raise ValueError(f"extra data after the JSON value at character {end}")
    return value


def dumps(value: Any) -> str:
    """json.dumps(value, separators=(",", ":")): ASCII, NaN allowed, keys as given."""
    if FALLBACK:
        import json

        return json.dumps(value, separators=(",", ":"))
    return "".join(_encode(value, 0))


def dumps_strict(value: Any) -> str:
    """dumps for the wire: ValueError for an infinite or NaN float, which JSON cannot carry and the broker's
    reader (orjson) refuses, so a request holding one is refused here, not lost without an answer."""
    if FALLBACK:
        import json

        return json.dumps(value, separators=(",", ":"), allow_nan=False)
    return "".join(_encode_strict(value, 0))
