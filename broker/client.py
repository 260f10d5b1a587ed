"""A client handle to the local broker (FLUX_URI): RPCs to any rank, event subscription.

This is what the in-cluster `flux` CLI and, later, the job-manager front ends use.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import time
from collections import deque
from typing import Any

import zmq

from .errors import FluxError
from .jsontext import dumps_bytes
from .protocol import CONTROL, EVENT, NODEID_ANY, REQUEST, RESPONSE, Message, ProtocolError, control

DEFAULT_TIMEOUT = 30.0
__all__ = ["DEFAULT_TIMEOUT", "FluxError", "Handle", "connect", "uri_to_endpoint"]


def uri_to_endpoint(uri: str) -> str:
    """local:///run/flux/local or ipc:///... -> the ZeroMQ ipc endpoint; tcp:// passes through."""
    if uri.startswith("local://"):
        return "ipc://" + uri[len("local://") :]
    if uri.startswith(("ipc://", "tcp://")):
        return uri
    raise FluxError(22, f"unsupported FLUX_URI {uri!r} (expected local://PATH)")


class Handle:
    """A connection to one broker. Not thread-safe; one per thread."""

    def __init__(self, uri: str | None = None) -> None:
        uri = uri or os.environ.get("FLUX_URI")
        if not uri:
            raise FluxError(2, "FLUX_URI is not set: run inside an instance (flux start) or pass a URI")
        path = uri_to_endpoint(uri)
        if path.startswith("ipc://") and not os.path.exists(path[len("ipc://") :]):
            raise FluxError(111, f"cannot connect to {uri}: no broker socket there")
        self.uri = uri
        self._ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
        self._sock = self._ctx.socket(zmq.DEALER)
        self._sock.setsockopt(zmq.LINGER, 0)
        self._sock.connect(path)
        self._tags = itertools.count(1)
        self._responses: dict[int, Message] = {}
        self._raw_tags: set[int] = set()  # requests whose answer is kept as JSON text (rpc_raw)
        self._raw: dict[int, bytes] = {}
        self._events: deque[Message] = deque()

    def __enter__(self) -> Handle:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        if not self._sock.closed:
            with contextlib.suppress(zmq.ZMQError):
                self._sock.send(control("client.disconnect").encode(), zmq.NOBLOCK)
            self._sock.close(0)

    # -------------------------------------------------------------------------------------------
    # open: any service's payload
    def send_request(self, topic: str, payload: dict[str, Any] | None = None, nodeid: int = NODEID_ANY) -> int:
        """Send a request without waiting; returns the matchtag to pass to `wait`."""
        tag = next(self._tags)
        msg = Message(REQUEST, topic, payload or {}, nodeid=nodeid, matchtag=tag)
        self._sock.send(msg.encode())
        return tag

    def wait(self, tag: int, timeout: float | None = DEFAULT_TIMEOUT) -> dict[str, Any]:  # open: any service's payload
        """The payload of the response with this matchtag; raises FluxError on an error response/timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while tag not in self._responses:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise FluxError(110, f"timed out after {timeout}s waiting for a response from {self.uri}")
            self._recv_one(remaining)
        msg = self._responses.pop(tag)
        if msg.errnum:
            raise FluxError(msg.errnum, msg.errstr or os.strerror(msg.errnum))
        return msg.payload

    def rpc(
        self,
        topic: str,
        payload: dict[str, Any] | None = None,  # open: any service's payload
        nodeid: int = NODEID_ANY,
        timeout: float | None = DEFAULT_TIMEOUT,
    ) -> dict[str, Any]:  # open: any service's payload
        """Request/response to the service `topic` on rank `nodeid` (NODEID_ANY: nearest provider)."""
        return self.wait(self.send_request(topic, payload, nodeid), timeout)

    def rpc_raw(
        self,
        topic: str,
        payload: dict[str, Any] | None = None,  # open: any service's payload
        nodeid: int = NODEID_ANY,
        timeout: float | None = DEFAULT_TIMEOUT,
    ) -> bytes:
        """rpc, with the answer's payload left as the JSON text the service sent (for a reader that passes it on)."""
        tag = self.send_request(topic, payload, nodeid)
        self._raw_tags.add(tag)
        try:
            payload = self.wait(tag, timeout)
            raw = self._raw.pop(tag, None)
            # None: the answer did not have its payload last (not written by Message.encode) and was decoded whole
            return raw if raw is not None else dumps_bytes(payload)
        finally:
            self._raw_tags.discard(tag)
            self._raw.pop(tag, None)  # an error answer's, or a late one's

    def getattr(self, name: str) -> str:
        return str(self.rpc("attr.get", {"name": name})["value"])

    # -------------------------------------------------------------------------------------------
    def subscribe(self, topic: str) -> None:
        """Receive events whose topic starts with `topic` (use recv_event)."""
        self.rpc("event.subscribe", {"topic": topic})

    def unsubscribe(self, topic: str) -> None:
        self.rpc("event.unsubscribe", {"topic": topic})

    def publish(self, topic: str, payload: dict[str, Any] | None = None) -> None:  # open: any service's payload
        self.rpc("event.publish", {"topic": topic, "payload": payload or {}})

    def recv_event(self, timeout: float | None = DEFAULT_TIMEOUT) -> Message | None:
        """The next event, or None after `timeout` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._events:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return None
            self._recv_one(remaining)
        return self._events.popleft()

    def _recv_one(self, timeout: float | None) -> None:
        ms = None if timeout is None else max(1, int(timeout * 1000))
        if not self._sock.poll(ms):
            return
        frame = self._sock.recv()
        try:
            if self._raw_tags:
                msg, payload = Message.split(frame)
                if msg.type == RESPONSE and msg.matchtag in self._raw_tags:
                    self._raw[msg.matchtag] = payload
                else:
                    msg = Message.decode(frame)
            else:
                msg = Message.decode(frame)
        except ProtocolError:
            return
        if msg.type == RESPONSE:
            self._responses[msg.matchtag] = msg
        elif msg.type == EVENT:
            self._events.append(msg)
        elif msg.type == CONTROL:
            pass


def connect(uri: str | None = None) -> Handle:
    """Open a handle to the broker at `uri` (default: $FLUX_URI)."""
    return Handle(uri)
