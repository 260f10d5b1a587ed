"""The broker's JSON writer (broker/jsontext.py): orjson, with the standard library's behaviour where they differ."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.jsontext import dumps, dumps_bytes, lines

_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.text()
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text() | st.integers(0, 99), inner, max_size=4),
    max_leaves=20,
)


@given(_values)
def test_reads_back_as_the_standard_library_would_write_it(value: object) -> None:
    assert json.loads(dumps(value)) == json.loads(json.dumps(value))


def test_an_infinite_float_is_written_as_null_which_every_json_reader_takes() -> None:
    """Not as the standard library's Infinity, which the broker's own reader (orjson), jansson and jq refuse;
    requests holding one are refused where they enter (tests/broker/test_cli_codec.py, jobspec validation)."""
    text = dumps({"a": float("inf"), "b": [float("-inf")]})
    assert text == '{"a":null,"b":[null]}'
    assert json.loads(text, parse_constant=lambda name: pytest.fail(f"{name} in {text}")) == {"a": None, "b": [None]}


def test_integer_keys_become_strings_and_big_integers_fall_back() -> None:
    assert json.loads(dumps_bytes({1: "a"})) == {"1": "a"}
    assert dumps({"id": 2**80}) == '{"id":1208925819614629174706176}'  # beyond orjson's 64 bits
    assert dumps({"a": [1, 2]}) == '{"a":[1,2]}'  # compact, as the journal and the wire expect


@given(st.lists(_values, max_size=5))
def test_lines_are_each_value_written_as_dumps_writes_it_one_a_line(values: list[object]) -> None:
    assert lines(values) == "".join(dumps(value) + "\n" for value in values)  # big integers too (fallback)
