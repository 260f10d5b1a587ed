"""The REST server's own ZMTP client of the broker's local socket (broker/rest/local_handle.py, broker/zmtp.py),
against a real ZeroMQ ROUTER standing in for the broker."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypedDict, TypeVar

import pytest
import zmq
import zmq.asyncio
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.errors import FluxError
from broker.protocol import Message
from broker.rest.local_handle import LocalAsyncHandle
from broker.rest.topics import JobIdRequest, LookupRequest, Topic
from broker.zmtp import DISCONNECT, GREETING, LONG, MAX_FRAME, FrameError, FrameReader, frame
from tests.waiting import async_wait_until

T = TypeVar("T")


class EchoedId(TypedDict):
    """What the fake broker answers a JobIdRequest: the payload, echoed (any request shape would do)."""

    echo: JobIdRequest


class EchoedLookup(TypedDict):
    echo: LookupRequest


@settings(max_examples=200, deadline=None)
@given(
    frames=st.lists(st.tuples(st.sampled_from([0, 1, 4]), st.binary(max_size=600)), max_size=12),
    cuts=st.lists(st.integers(min_value=0, max_value=8000), max_size=20),
)
def test_frames_come_out_whole_however_the_stream_is_cut(frames: list[tuple[int, bytes]], cuts: list[int]) -> None:
    stream = GREETING + b"".join(frame(body, command=bool(flags & 4), more=bool(flags & 1)) for flags, body in frames)
    bounds = sorted({0, len(stream), *(c for c in cuts if c < len(stream))})
    reader = FrameReader()
    got = [f for a, b in itertools.pairwise(bounds) for f in reader.feed(stream[a:b])]
    assert [(flags & ~LONG, body) for flags, body in got] == frames


def test_a_stream_that_is_not_zmtp_or_announces_a_frame_too_large_is_refused() -> None:
    with pytest.raises(FrameError, match="greeting"):
        FrameReader().feed(b"HTTP/1.1 200 OK\r\n" + b" " * 64)
    reader = FrameReader()
    with pytest.raises(FrameError, match="bytes"):
        reader.feed(GREETING + bytes([LONG]) + (MAX_FRAME + 1).to_bytes(8, "big"))


def test_a_peer_that_is_not_a_broker_fails_the_request_without_waiting_for_its_timeout(tmp_path: Path) -> None:
    endpoint = tmp_path / "broker"

    async def scenario() -> int:
        async def impostor(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.write(b"SSH-2.0-OpenSSH_9.2\r\n" + b"x" * 64)
            await writer.drain()
            await reader.read()  # until the handle hangs up

        server = await asyncio.start_unix_server(impostor, path=str(endpoint))
        with pytest.raises(FluxError) as refused:
            await LocalAsyncHandle(f"local://{endpoint}").rpc(Topic("t"), {}, timeout=3)
        server.close()
        return refused.value.errnum

    assert run(scenario) == 71  # EPROTO at once, not ETIMEDOUT after retrying for 3 s


@asynccontextmanager
async def fake_broker(endpoint: Path, seen: list[bytes] | None = None) -> AsyncIterator[zmq.asyncio.Socket]:
    """A ROUTER that answers every request at once with its payload echoed (and records every frame)."""
    router = zmq.asyncio.Context.instance().socket(zmq.ROUTER)
    router.setsockopt(zmq.LINGER, 0)
    router.bind(f"ipc://{endpoint}")

    async def serve() -> None:
        while True:
            ident, body = await router.recv_multipart()
            if seen is not None:
                seen.append(body)
            if body == DISCONNECT:
                continue
            msg = Message.decode(body)
            await router.send_multipart([ident, msg.response({"echo": msg.payload}).encode()])

    server = asyncio.ensure_future(serve())
    try:
        yield router
    finally:
        server.cancel()
        router.close(0)


def run(scenario: Callable[[], Coroutine[Any, Any, T]]) -> T:
    return asyncio.run(scenario())


def test_a_broker_that_starts_later_is_waited_for_and_none_at_all_times_out(tmp_path: Path) -> None:
    endpoint = tmp_path / "broker"

    async def scenario() -> tuple[EchoedId, int]:
        handle = LocalAsyncHandle(f"local://{endpoint}")
        waiting = asyncio.ensure_future(handle.rpc(Topic[EchoedId]("t"), {"id": 1}, timeout=10))
        await asyncio.sleep(0.4)  # sleep: nobody listens yet for a while: the handle retries, as ZeroMQ would
        async with fake_broker(endpoint):
            answer = await asyncio.wait_for(waiting, 5)
        handle.close()
        with pytest.raises(FluxError) as nobody:
            await LocalAsyncHandle(f"local://{tmp_path / 'nobody'}").rpc(Topic("t"), {}, timeout=0.5)
        return answer, nobody.value.errnum

    answer, errnum = run(scenario)
    assert answer == {"echo": {"id": 1}}
    assert errnum == 110  # ETIMEDOUT: nobody ever listens


def test_a_lost_connection_fails_its_waiting_requests_at_once_and_the_next_one_reconnects(tmp_path: Path) -> None:
    endpoint = tmp_path / "broker"

    async def scenario() -> tuple[int, EchoedId]:
        handle = LocalAsyncHandle(f"local://{endpoint}")
        silent = zmq.asyncio.Context.instance().socket(zmq.ROUTER)  # takes requests, answers none
        silent.setsockopt(zmq.LINGER, 0)
        silent.bind(f"ipc://{endpoint}")
        waiting = asyncio.ensure_future(handle.rpc(Topic[EchoedId]("t"), {}, timeout=30))
        await silent.recv_multipart()  # the request arrived
        silent.close(0)  # the broker goes away
        with pytest.raises(FluxError) as lost:
            await asyncio.wait_for(waiting, 10)
        endpoint.unlink(missing_ok=True)
        async with fake_broker(endpoint):
            again = await handle.rpc(Topic[EchoedId]("t"), {"id": 2}, timeout=10)
        handle.close()
        return lost.value.errnum, again

    errnum, again = run(scenario)
    assert errnum == 104  # ECONNRESET at once: not ETIMEDOUT after its 30 s (nor asyncio's TimeoutError after 10)
    assert again == {"echo": {"id": 2}}


def test_many_requests_share_one_connection_and_close_says_goodbye(tmp_path: Path) -> None:
    endpoint = tmp_path / "broker"
    seen: list[bytes] = []

    async def scenario() -> list[EchoedLookup]:
        async with fake_broker(endpoint, seen):
            handle = LocalAsyncHandle(f"local://{endpoint}")
            answers = await asyncio.gather(
                *(
                    handle.rpc(Topic[EchoedLookup]("t"), {"id": i, "keys": ["x" * 300 * (i % 2)], "flags": 0})
                    for i in range(50)
                )
            )
            handle.close()
            await async_wait_until("the goodbye", lambda: seen and seen[-1] == DISCONNECT, timeout=10)
        return answers

    answers = run(scenario)
    assert [a["echo"]["id"] for a in answers] == list(range(50))
    assert len(seen) == 51 and seen[-1] == DISCONNECT
