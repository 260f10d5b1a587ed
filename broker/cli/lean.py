"""A zmq-free client for the job CLI: ZMTP 3.0 (NULL mechanism, DEALER) spoken directly on the broker's ipc socket.

Importing pyzmq costs more than the rest of `flux run true`; the broker's local socket is a plain Unix socket
speaking ZMTP, and a DEALER that sends one-frame JSON messages needs only the greeting, a READY command and
frame headers (broker/zmtp.py). Falls back to broker.client.Handle for tcp:// URIs.
"""

from __future__ import annotations

import _socket  # not `socket`: its enums and helpers cost a CLI call several milliseconds of start-up
import itertools
import os
import time

from ..errors import FluxError
from ..zmtp import DISCONNECT, GREETING_SIZE, MAX_FRAME, dealer_hello, frame, is_greeting
from .codec import dumps_strict, loads

TYPE_CHECKING = False  # typing's import costs `flux run true` 5 ms: annotations only
if TYPE_CHECKING:
    from typing import Any

    from .replies import WireMessage


class LeanHandle:
    """Request/response to the local broker over a Unix socket, the subset JobClient needs."""

    def __init__(self, uri: str) -> None:
        path = uri.removeprefix("local://").removeprefix("ipc://")
        self.uri = uri
        self._sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            self._sock.connect(path)
        except OSError as exc:
            self._sock.close()
            raise FluxError(111, f"cannot connect to {uri}: {exc.strerror or exc}") from None
        self._buf = bytearray()
        self._tags = itertools.count(1)
        self._responses: dict[int, WireMessage] = {}
        self._events: list[WireMessage] = []  # received, not yet read (the job CLI reads none)
        self._sock.sendall(dealer_hello())
        greeting = self._read_exact(GREETING_SIZE, None)  # the broker's
        if not is_greeting(greeting):
            self._refuse("its greeting is not ZMTP's")
        self._read_frame(None)  # its READY

    def __enter__(self) -> LeanHandle:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._sock.fileno() >= 0:
            try:  # noqa: SIM105 - importing contextlib costs `flux run` start-up
                self._sock.sendall(frame(DISCONNECT))
            except OSError:
                pass  # the broker went away first
            self._sock.close()

    # ------------------------------------------------------------------ framing
    def _read_exact(self, count: int, deadline: float | None) -> bytes:
        while len(self._buf) < count:
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError
                self._sock.settimeout(remaining)
            else:
                self._sock.settimeout(None)
            try:
                chunk = self._sock.recv(1 << 20)
            except TimeoutError:
                raise
            except OSError as exc:
                raise FluxError(104, f"lost connection to {self.uri}: {exc.strerror or exc}") from None
            if not chunk:
                raise FluxError(104, f"lost connection to {self.uri}: the broker closed it")
            self._buf += chunk
        data = bytes(self._buf[:count])
        del self._buf[:count]
        return data

    def _read_frame(self, deadline: float | None) -> tuple[int, bytes]:
        flags = self._read_exact(1, deadline)[0]
        size = int.from_bytes(self._read_exact(8, deadline), "big") if flags & 2 else self._read_exact(1, deadline)[0]
        if size > MAX_FRAME:  # a broken stream or another program: never wait for (or buffer) that much
            self._refuse(f"it announced a frame of {size} bytes (at most {MAX_FRAME})")
        return flags, self._read_exact(size, deadline)

    def _refuse(self, why: str) -> None:
        self._sock.close()
        raise FluxError(71, f"{self.uri} is not a broker speaking ZMTP 3: {why}")  # EPROTO

    # ------------------------------------------------------------------ requests
    # open: an RPC's payload and answer, their shape the topic's (JobClient's methods type what they read)
    def send_request(self, topic: str, payload: dict[str, Any] | None = None, nodeid: int = -1) -> int:
        tag = next(self._tags)
        body: WireMessage = {"t": "req", "topic": topic, "m": tag}
        if nodeid != -1:
            body["n"] = nodeid
        if payload:
            body["p"] = payload  # the last member, as broker/protocol.py writes every message
        self._sock.sendall(frame(wire_json(topic, body)))
        return tag

    def send_encoded(self, topic: str, payload: bytes) -> int:
        """send_request with the payload already JSON-encoded: `flux submit --cc` encodes a shared jobspec once."""
        tag = next(self._tags)
        head = wire_json(topic, {"t": "req", "topic": topic, "m": tag})
        self._sock.sendall(frame(head[:-1] + b',"p":' + payload + b"}"))
        return tag

    def wait(self, tag: int, timeout: float | None = 30.0) -> dict[str, Any]:  # open: the answer, as above
        deadline = None if timeout is None else time.monotonic() + timeout
        while tag not in self._responses:
            try:
                flags, data = self._read_frame(deadline)
            except TimeoutError:
                raise FluxError(110, f"timed out after {timeout}s waiting for a response from {self.uri}") from None
            if flags & 0x04:
                continue  # commands (PING etc.)
            message: WireMessage = loads(data)
            if message.get("t") == "rsp":
                self._responses[int(message.get("m", 0))] = message
            elif message.get("t") == "evt":
                self._events.append(message)
        message = self._responses.pop(tag)
        if message.get("e"):
            errnum = int(message["e"])
            raise FluxError(errnum, str(message.get("es") or os.strerror(errnum)))
        return message.get("p", {})

    def rpc(  # open: payload and answer, as send_request's
        self, topic: str, payload: dict[str, Any] | None = None, nodeid: int = -1, timeout: float | None = 30.0
    ) -> dict[str, Any]:  # open: as above
        return self.wait(self.send_request(topic, payload, nodeid), timeout)


def wire_json(topic: str, value: Any) -> bytes:
    """A request as the broker reads it; EINVAL naming the request for what JSON cannot say (inf, NaN)."""
    try:
        return dumps_strict(value).encode()
    except ValueError as exc:
        raise FluxError(22, f"{topic}: {exc} (JSON has no Infinity or NaN)") from None


def connect(uri: str | None = None) -> Any:
    """A handle to $FLUX_URI: the lean one for local:// and ipc://, pyzmq's for anything else."""
    uri = uri or os.environ.get("FLUX_URI")
    if not uri:
        raise FluxError(2, "FLUX_URI is not set: run inside an instance (flux start) or pass a URI")
    if uri.startswith(("local://", "ipc://")):
        return LeanHandle(uri)
    from ..client import Handle

    return Handle(uri)
