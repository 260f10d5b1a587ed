"""Deeply nested JSON from outside (issue 41): measured without recursion, and refused by the broker with an answer."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

import zmq
from hypothesis import given
from hypothesis import strategies as st

from broker.client import uri_to_endpoint
from broker.jobs.build import build_jobspec
from broker.jsondepth import MAX_DEPTH, json_depth, too_deep
from broker.protocol import EPROTO, Message
from broker.testing import Instance, run_flux

_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\ab,:'),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(alphabet='[]{}"\\ab'), inner, max_size=3),
    max_leaves=30,
)


def _reference_depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max((_reference_depth(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((_reference_depth(v) for v in value.values()), default=0)
    return 0


@given(_values, st.booleans())
def test_the_depth_is_the_parsed_value_s_whatever_the_strings_hold(value: Any, spaced: bool) -> None:
    text = json.dumps(value, indent=1 if spaced else None).encode()
    assert json_depth(text) == _reference_depth(value)
    assert too_deep(text, 2) == (_reference_depth(value) > 2)


def test_far_past_the_recursion_limit_without_recursing() -> None:
    assert json_depth(b"[" * 200_000 + b"]" * 200_000) == 200_000
    assert too_deep(b'{"a":' * 65 + b"1" + b"}" * 65) and not too_deep(b'{"a":' * 64 + b"1" + b"}" * 64)
    assert not too_deep(b'["' + b"[" * 1000 + b'"]')  # brackets in a string are text
    assert not too_deep(b'["\\"' + b"[" * 1000 + b'"]')  # an escaped quote does not end the string
    assert MAX_DEPTH == 64


def _deep_submit(depth: int, tag: int) -> bytes:
    """A job-manager.submit frame of a real jobspec whose user attribute nests `depth` levels."""
    jobspec = build_jobspec(["true"], cwd="/", environment={}, user_attributes={"x": "@@"})
    text = json.dumps({"jobspec": jobspec}).replace('"@@"', "[" * depth + "]" * depth)
    return b'{"t":"req","topic":"job-manager.submit","m":%d,"p":%s}' % (tag, text.encode())


def test_a_deeply_nested_payload_is_answered_and_the_broker_reads_on(make_instance: Callable[..., Instance]) -> None:
    """Before: a submit whose user attribute nested 1,000 levels passed orjson's reader and killed the lead in
    the journal's encoder (RecursionError); 100,000 levels were dropped unanswered, the client timing out."""
    inst = make_instance(1)
    proc = inst.start(0)
    with inst.handle(0) as handle:
        handle.rpc("attr.get", {"name": "rank"}, timeout=15)
    sock: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(uri_to_endpoint(inst.uri(0)))
    try:
        for tag, depth in enumerate((MAX_DEPTH + 1, 1000, 100_000), start=1):
            sock.send(_deep_submit(depth, tag))
            assert sock.poll(15_000), f"no answer to a payload {depth} levels deep"
            reply = Message.decode(sock.recv())
            assert (reply.matchtag, reply.errnum) == (tag, EPROTO)
            assert reply.errstr == "job-manager.submit: payload: JSON nested deeper than 64 levels (arrays and objects)"
        sock.send(_deep_submit(MAX_DEPTH - 8, 9))  # within the limit: the job manager takes it
        assert sock.poll(15_000)
        reply = Message.decode(sock.recv())
        assert reply.errnum == 0 and reply.payload["id"] > 0, reply
    finally:
        sock.close(0)
    assert proc.poll() is None
    with inst.handle(0) as handle:
        assert len(handle.rpc("job-manager.list", {}, timeout=15)["jobs"]) == 1
    assert os.path.exists(inst.rundir(0) / "local")


def test_the_cli_refuses_deep_json_values_naming_the_flag() -> None:
    """Before: a RecursionError traceback from json.loads (`-S user.x=[[[...` 5,000 levels, `flux event pub`)."""
    env = dict(os.environ, FLUX_URI="local:///nonexistent/local")
    deep = "[" * 5000 + "]" * 5000
    for args, words in (
        (["submit", "--dry-run", f"--setattr=user.x={deep}", "true"], "--setattr: user.x: JSON nested deeper"),
        (["submit", "--dry-run", f"--setopt=x={deep}", "true"], "--setopt: x: JSON nested deeper"),
        (["event", "pub", "t", '{"a":' * 5000 + "1" + "}" * 5000], "payload: JSON nested deeper"),
    ):
        proc = run_flux(*args, env=env)
        assert proc.returncode != 0 and words in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-500:]
    shallow = run_flux("submit", "--dry-run", "--setattr=user.x=[[1]]", "true", env=env)
    assert json.loads(shallow.stdout)["attributes"]["user"]["x"] == [[1]]
