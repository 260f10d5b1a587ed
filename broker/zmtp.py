"""ZMTP 3.0 as a DEALER speaks it to the broker's local socket (NULL mechanism): greeting, commands, frames.

Why by hand: the broker's local socket is a plain Unix socket speaking ZMTP, and a client that sends one-frame
JSON messages needs only this much of it. The job CLI (broker/cli/lean.py) skips pyzmq's import, most of a
`flux run true`; the REST server's event loop (broker/rest/local_handle.py) skips the ZeroMQ I/O thread that every
message otherwise crosses twice, each crossing a thread wake-up. Greeting as 3.0, a peer sends no PING (3.1's).

Imports nothing but broker.errors: `flux run` and `flux submit` load it at start-up.
"""

from __future__ import annotations

from .errors import InputError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Final

MORE: Final = 0x01
LONG: Final = 0x02
COMMAND: Final = 0x04
GREETING_SIZE: Final = 64
GREETING: Final = b"\xff" + b"\x00" * 8 + b"\x7f" + b"\x03\x00" + b"NULL".ljust(20, b"\x00") + b"\x00" + b"\x00" * 31
DISCONNECT: Final = b'{"t":"ctl","topic":"client.disconnect"}'
"""The broker's notice that a client is leaving (its subscriptions and pending requests go with it)."""
MAX_FRAME: Final = 1 << 30
"""The largest frame a reader accepts: a length past it is a broken stream, not a message to wait for."""


def frame(body: bytes, command: bool = False, more: bool = False) -> bytes:
    flags = (COMMAND if command else 0) | (MORE if more else 0)
    if len(body) > 255:
        return bytes([flags | LONG]) + len(body).to_bytes(8, "big") + body
    return bytes([flags, len(body)]) + body


def command(name: bytes, properties: dict[bytes, bytes]) -> bytes:
    body = bytes([len(name)]) + name
    for key, value in properties.items():
        body += bytes([len(key)]) + key + len(value).to_bytes(4, "big") + value
    return frame(body, command=True)


def is_greeting(data: bytes | bytearray) -> bool:
    """Whether the first GREETING_SIZE bytes of a stream are a ZMTP greeting (its signature's two fixed bytes)."""
    return len(data) >= GREETING_SIZE and data[0] == 0xFF and data[9] == 0x7F


def dealer_hello() -> bytes:
    """What a DEALER sends first: its greeting and its READY."""
    return GREETING + command(b"READY", {b"Socket-Type": b"DEALER"})


class FrameError(InputError):
    """The stream is not ZMTP as this reader speaks it; the connection should be closed."""


class FrameReader:
    """Frames out of a byte stream however it is cut: the peer's greeting first, then (flags, body) pairs."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._greeted = False

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        buf = self._buf
        buf += data
        if not self._greeted:
            if len(buf) < GREETING_SIZE:
                return []
            if not is_greeting(buf):
                raise FrameError("the peer's greeting is not ZMTP's")
            del buf[:GREETING_SIZE]
            self._greeted = True
        frames: list[tuple[int, bytes]] = []
        pos, end = 0, len(buf)
        while end - pos >= 2:
            flags = buf[pos]
            if flags & LONG:
                if end - pos < 9:
                    break
                size, head = int.from_bytes(buf[pos + 1 : pos + 9], "big"), 9
            else:
                size, head = buf[pos + 1], 2
            if size > MAX_FRAME:
                raise FrameError(f"a frame of {size} bytes (at most {MAX_FRAME})")
            if end - pos < head + size:
                break
            frames.append((flags, bytes(buf[pos + head : pos + head + size])))
            pos += head + size
        del buf[:pos]
        return frames
