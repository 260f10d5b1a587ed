"""The broker's tree-overlay sockets: a CURVE ROUTER for its children, a CURVE DEALER to its parent.

All brokers share one keypair (the instance's curve certificate). A ZAP handler admits only clients
presenting that public key, so a broker with another key (or plaintext) never gets a connection.
"""

from __future__ import annotations

import sys

import zmq
from zmq.utils import z85

from .curve_cert import CurveCertificate
from .errors import BrokerFailure
from .netaddr import AddressError, resolve_bind
from .protocol import Message, ProtocolError

RECONNECT_IVL_MS = 25  # bounded reconnect: a follower started early joins ~immediately once the parent is up
RECONNECT_IVL_MAX_MS = 100
ZAP_ENDPOINT = "inproc://zeromq.zap.01"
ZAP_DOMAIN = b"flux"
PARENT_EVENTS = zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_DISCONNECTED
"""What a child watches of its parent connection: a crashed parent is seen as the connection closing, at once,
not after heartbeat.timeout of silence (which a starved but live parent may also keep)."""


def monitor_event(frames: list[bytes]) -> int:
    """The event number of a zmq monitor message (16-bit event, 32-bit value, then the endpoint), -1 if malformed.
    Read here rather than with zmq.utils.monitor, which imports zmq.asyncio and so asyncio and ssl: about 5 MB
    and 80 ms in every broker, and in the process `flux start --test-size` forks its brokers from."""
    if len(frames) != 2 or len(frames[0]) != 6:
        return -1
    return int.from_bytes(frames[0][:2], sys.byteorder)


class OverlayError(BrokerFailure):
    """A socket that cannot be set up (bind failure, bad address)."""


class Overlay:
    """Owns the overlay sockets of one broker; the broker's loop polls `child_sock`, `parent_sock`, `zap_sock`."""

    def __init__(self, ctx: zmq.Context[zmq.Socket[bytes]], rank: int, cert: CurveCertificate | None) -> None:
        self.ctx = ctx
        self.rank = rank
        self.cert = cert
        self.child_sock: zmq.Socket[bytes] | None = None
        self.parent_sock: zmq.Socket[bytes] | None = None
        self.parent_monitor: zmq.Socket[bytes] | None = None
        self.zap_sock: zmq.Socket[bytes] | None = None
        self.bound_uri: str | None = None
        self.rejected = 0  # ZAP denials (wrong key)

    # children side -----------------------------------------------------------------------------
    def bind_children(self, uri: str) -> str:
        """Bind the children's ROUTER; return the concrete endpoint. Raises OverlayError naming the URI."""
        try:
            endpoint = resolve_bind(uri)
        except AddressError as exc:
            raise OverlayError(f"cannot bind overlay socket: {exc}") from None
        sock = self.ctx.socket(zmq.ROUTER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
        sock.setsockopt(zmq.ROUTER_HANDOVER, 1)
        sock.setsockopt(zmq.SNDHWM, 0)
        sock.setsockopt(zmq.RCVHWM, 0)
        if self.cert is not None:
            if self.zap_sock is None:
                self.zap_sock = self.ctx.socket(zmq.REP)
                self.zap_sock.setsockopt(zmq.LINGER, 0)
                self.zap_sock.bind(ZAP_ENDPOINT)
            sock.setsockopt(zmq.ZAP_DOMAIN, ZAP_DOMAIN)
            sock.setsockopt(zmq.CURVE_SERVER, 1)
            sock.setsockopt(zmq.CURVE_SECRETKEY, self.cert.secret_bytes)
            sock.setsockopt(zmq.CURVE_PUBLICKEY, self.cert.public_bytes)
        try:
            sock.bind(endpoint)
        except zmq.ZMQError as exc:
            sock.close(0)
            shown = uri if uri == endpoint else f"{uri} ({endpoint})"
            raise OverlayError(f"cannot bind overlay socket {shown}: {exc.strerror}") from None
        self.child_sock = sock
        self.bound_uri = sock.getsockopt_string(zmq.LAST_ENDPOINT)
        return self.bound_uri

    def handle_zap(self) -> None:
        """Answer ZAP requests: admit CURVE clients holding the instance's public key only."""
        assert self.zap_sock is not None and self.cert is not None
        while True:
            try:
                frames = self.zap_sock.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            version, request_id = frames[0], frames[1]
            mechanism = frames[5] if len(frames) > 5 else b""
            key = frames[6] if len(frames) > 6 else b""
            ok = mechanism == b"CURVE" and z85.encode(key) == self.cert.public_bytes
            if not ok:
                self.rejected += 1
                print(
                    f"flux-broker[{self.rank}]: overlay: rejected {mechanism.decode(errors='replace')} peer "
                    f"{frames[3].decode(errors='replace')}: unknown key",
                    file=sys.stderr,
                )
            status = (b"200", b"OK") if ok else (b"400", b"unknown key")
            self.zap_sock.send_multipart([version, request_id, *status, b"", b""])

    def send_child(self, rank: int, msg: Message) -> bool:
        """Send to a connected child; False if it is not connected: ROUTER_MANDATORY refuses a peer whose
        connection has closed (EHOSTUNREACH), and the high-water marks are unlimited, so nothing else refuses."""
        if self.child_sock is None:
            return False
        try:
            self.child_sock.send_multipart([str(rank).encode(), msg.encode()], zmq.NOBLOCK)
        except zmq.ZMQError:
            return False
        return True

    def recv_children(self) -> list[tuple[int, Message]]:
        """Drain the children's socket (malformed frames are dropped)."""
        out: list[tuple[int, Message]] = []
        assert self.child_sock is not None
        while True:
            try:
                frames = self.child_sock.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return out
            if len(frames) != 2:
                continue
            try:
                out.append((int(frames[0]), Message.decode(frames[1])))
            except (ValueError, ProtocolError):
                continue

    # parent side -------------------------------------------------------------------------------
    def connect_parent(self, uri: str, connect_timeout: float) -> None:
        """Connect (asynchronously) to the parent; messages queue until the connection is up."""
        sock = self.ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.ROUTING_ID, str(self.rank).encode())
        sock.setsockopt(zmq.RECONNECT_IVL, RECONNECT_IVL_MS)
        sock.setsockopt(zmq.RECONNECT_IVL_MAX, RECONNECT_IVL_MAX_MS)
        sock.setsockopt(zmq.CONNECT_TIMEOUT, max(1, int(connect_timeout * 1000)))
        sock.setsockopt(zmq.SNDHWM, 0)
        sock.setsockopt(zmq.RCVHWM, 0)
        if self.cert is not None:
            sock.setsockopt(zmq.CURVE_SERVERKEY, self.cert.public_bytes)
            sock.setsockopt(zmq.CURVE_PUBLICKEY, self.cert.public_bytes)
            sock.setsockopt(zmq.CURVE_SECRETKEY, self.cert.secret_bytes)
        self.parent_sock = sock
        self.parent_monitor = sock.get_monitor_socket(PARENT_EVENTS)  # before connecting: no event missed
        try:
            sock.connect(uri)
        except zmq.ZMQError as exc:
            self.close_parent()
            raise OverlayError(f"cannot connect to parent {uri}: {exc.strerror}") from None

    def parent_connection_events(self) -> list[bool]:
        """Drain the parent monitor: True for a connection made (handshake done), False for one closed."""
        out: list[bool] = []
        if self.parent_monitor is None:
            return out
        while True:
            try:
                frames = self.parent_monitor.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return out
            event = monitor_event(frames)
            if event in (zmq.EVENT_HANDSHAKE_SUCCEEDED, zmq.EVENT_DISCONNECTED):
                out.append(event == zmq.EVENT_HANDSHAKE_SUCCEEDED)

    def close_parent(self, linger_ms: int = 0) -> None:
        """Close the parent connection (and its monitor); `linger_ms` lets a last message (goodbye) go out."""
        if self.parent_sock is not None:
            if self.parent_monitor is not None:
                self.parent_sock.disable_monitor()
                self.parent_monitor.close(0)
                self.parent_monitor = None
            self.parent_sock.close(linger_ms)
            self.parent_sock = None

    def send_parent(self, msg: Message) -> bool:
        if self.parent_sock is None:
            return False
        try:
            self.parent_sock.send(msg.encode(), zmq.NOBLOCK)
        except zmq.ZMQError:
            return False
        return True

    def recv_parent(self) -> list[Message]:
        out: list[Message] = []
        assert self.parent_sock is not None
        while True:
            try:
                frame = self.parent_sock.recv(zmq.NOBLOCK)
            except zmq.Again:
                return out
            try:
                out.append(Message.decode(frame))
            except ProtocolError:
                continue

    def close(self) -> None:
        self.close_parent()
        for sock in (self.child_sock, self.zap_sock):
            if sock is not None:
                sock.close(0)
        self.child_sock = self.zap_sock = None
