"""The job CLI's own ZMTP client (broker/cli/lean.py) against peers that are not brokers.

A `flux` command pointed at the wrong socket must fail at once with EPROTO, never wait for a frame it was told
is terabytes long, nor buffer it.
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from broker.cli.lean import LeanHandle
from broker.errors import FluxError
from broker.zmtp import GREETING, GREETING_SIZE, MAX_FRAME, command

EPROTO = 71


def _serve(path: Path, answer: Callable[[socket.socket], None]) -> threading.Thread:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(1)

    def run() -> None:
        conn, _ = listener.accept()
        with conn, listener:
            answer(conn)
            # held open until the client closes its end: a client waiting for more would wait out pytest's timeout
            while conn.recv(65536):
                pass

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@pytest.fixture
def endpoint(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "local"


def test_a_peer_whose_greeting_is_not_zmtp_is_refused_at_once(endpoint: Path) -> None:
    _serve(endpoint, lambda conn: conn.sendall(b"HTTP/1.1 400 Bad Request\r\n".ljust(GREETING_SIZE, b" ")))
    with pytest.raises(FluxError) as raised:  # at once: the peer never closes the connection
        LeanHandle(f"local://{endpoint}")
    assert raised.value.errnum == EPROTO and "greeting is not ZMTP" in str(raised.value)


def test_a_frame_announced_past_the_cap_is_refused_without_waiting_for_it(endpoint: Path) -> None:
    def broker_then_garbage(conn: socket.socket) -> None:
        conn.sendall(GREETING + command(b"READY", {b"Socket-Type": b"ROUTER"}))
        conn.recv(4096)  # the client's greeting and READY, maybe its request
        conn.sendall(bytes([0x02]) + struct.pack(">Q", MAX_FRAME + 1))  # a long frame, its body never sent

    _serve(endpoint, broker_then_garbage)
    handle = LeanHandle(f"local://{endpoint}")
    with pytest.raises(FluxError) as raised:  # EPROTO at once, not ETIMEDOUT after the 30 s
        handle.rpc("broker.ping", timeout=30)
    assert raised.value.errnum == EPROTO and f"a frame of {MAX_FRAME + 1} bytes" in str(raised.value)
