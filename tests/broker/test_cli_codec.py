"""The lean CLI's JSON (broker/cli/codec.py) reads and writes exactly as the json package does."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.cli import codec


def _json_values(infinities: bool) -> st.SearchStrategy[object]:
    return st.recursive(
        st.none()
        | st.booleans()
        | st.integers(-(2**70), 2**70)
        | st.floats(allow_nan=False, allow_infinity=infinities)
        | st.text(alphabet=st.characters(codec="utf-8")),
        lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=10), inner, max_size=5),
        max_leaves=30,
    )


values = _json_values(infinities=True)
finite_values = _json_values(infinities=False)  # what JSON itself can carry


def test_the_c_codec_is_in_use() -> None:
    assert codec.FALLBACK is False  # CPython 3.11's _json: the fast path, not the json package


@settings(max_examples=400, deadline=None)
@given(value=values, pad=st.sampled_from(["", " ", "\n\t ", "\r\n"]))
def test_dumps_and_loads_agree_with_json(value: object, pad: str) -> None:
    text = codec.dumps(value)
    assert text == json.dumps(value, separators=(",", ":"))
    assert codec.loads(pad + text + pad) == json.loads(text)
    assert codec.loads((pad + text).encode()) == json.loads(text)


def test_non_finite_numbers_and_int_keys_as_json_writes_them() -> None:
    value = {1: float("inf"), "b": [float("-inf")]}
    assert codec.dumps(value) == json.dumps(value, separators=(",", ":")) == '{"1":Infinity,"b":[-Infinity]}'
    assert math.isnan(codec.loads("NaN"))


@given(value=finite_values)
def test_the_wire_encoding_is_the_same_text_for_what_json_can_carry(value: object) -> None:
    assert codec.dumps_strict(value) == codec.dumps(value)


@pytest.mark.parametrize("bad", [float("inf"), float("-inf"), float("nan")])
def test_the_wire_encoding_refuses_what_json_cannot_carry(bad: float) -> None:
    """The broker reads requests with orjson, which refuses Infinity and NaN: sent, such a request was dropped
    and its client waited out its timeout."""
    with pytest.raises(ValueError, match="Out of range float"):
        codec.dumps_strict({"jobspec": {"attributes": {"user": {"x": [bad]}}}})


@pytest.mark.parametrize("text", ["", "   ", "{", '{"a":1}x', "[1,]", "nul", '"\\x"', "{'a': 1}", '"a\nb"'])
def test_what_json_refuses_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        json.loads(text)
    with pytest.raises(ValueError):
        codec.loads(text)


def test_what_json_cannot_write_is_refused_the_same_way() -> None:
    with pytest.raises(TypeError, match="Object of type set is not JSON serializable"):
        codec.dumps({"a": {1}})
