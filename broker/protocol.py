"""The one message shape that travels on the overlay and the local client socket (one JSON frame).

Requests carry a route stack so the response retraces the request's path hop by hop, as in Flux.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from broker.errors import InputError
from broker.jsondepth import MAX_DEPTH, depth_problem, too_deep
from broker.jsontext import dumps_bytes

if TYPE_CHECKING:
    from broker.payloads import ControlPayload

REQUEST = "req"
RESPONSE = "rsp"
EVENT = "evt"
CONTROL = "ctl"
TYPES = {REQUEST, RESPONSE, EVENT, CONTROL}

NODEID_ANY = -1  # handle locally if the service exists here, otherwise upstream (Flux's FLUX_NODEID_ANY)

# errno values used in error responses (Linux numbering, as Flux uses errno)
ENOENT = 2
EPROTO = 71
ENOSYS = 38
EPERM = 1
ECHILD = 10
EINVAL = 22
EHOSTUNREACH = 113
ETIMEDOUT = 110


class ProtocolError(InputError):
    """A frame that is not a valid message."""


class PayloadError(ProtocolError):
    """A frame whose header is a valid message but whose payload is refused: `header` (payload empty) is what
    an error answer to the sender is made from, and `reason` what it says."""

    def __init__(self, header: Message, reason: str) -> None:
        super().__init__(f"{header.topic}: {reason}")
        self.header = header
        self.reason = reason


@dataclass(slots=True)
class Message:
    """A request, response, event or overlay control message."""

    type: str
    topic: str
    payload: dict[str, Any] = field(default_factory=dict)  # open: any message's payload
    nodeid: int = NODEID_ANY
    matchtag: int = 0
    route: list[str] = field(default_factory=list)
    errnum: int = 0
    errstr: str = ""
    seq: int = 0
    sender: int = -1
    encoded_payload: str = ""
    """The payload as JSON text already (a JSON object), sent instead of `payload`: a large answer assembled
    from pieces its service keeps encoded (job-manager.list) is not decoded and encoded again per message."""

    def encode(self) -> bytes:
        body: dict[str, Any] = {"t": self.type, "topic": self.topic}  # open: any message's payload
        if self.nodeid != NODEID_ANY:
            body["n"] = self.nodeid
        if self.matchtag:
            body["m"] = self.matchtag
        if self.route:
            body["r"] = self.route
        if self.errnum:
            body["e"] = self.errnum
            body["es"] = self.errstr
        if self.seq:
            body["s"] = self.seq
        if self.sender != -1:
            body["f"] = self.sender
        if self.payload and not self.encoded_payload:
            body["p"] = self.payload  # always the last member: see `split`
        data = dumps_bytes(body)
        if self.encoded_payload:  # spliced in as the last member: the body always has members, so ends in "}"
            return b'%s,"p":%s}' % (data[:-1], self.encoded_payload.encode())
        return data

    @classmethod
    def split(cls, frame: bytes) -> tuple[Message, bytes]:
        """The message without its payload, and the payload's JSON text undecoded: a reader that only passes a
        large answer on (the REST server's listings) skips decoding it and encoding it again.

        Relies on `encode` writing the payload as the last member. The header's members are numbers and strings,
        and a quote inside a JSON string is always escaped, so the first `,"p":` is the payload's key."""
        at = frame.find(b',"p":')
        if at < 0 or not frame.endswith(b"}"):
            return cls.decode(frame), b"{}"
        return cls.decode(frame[:at] + b"}"), frame[at + 5 : -1]

    def decoded(self) -> Message:
        """This message with an encoded payload turned back into `payload` (for a reader in this process)."""
        if self.encoded_payload:
            self.payload, self.encoded_payload = json.loads(self.encoded_payload), ""
        return self

    @classmethod
    def decode_checked(cls, frame: bytes) -> Message:
        """`decode` for a frame from outside the instance (a client): a payload nested deeper than MAX_DEPTH
        levels, or one that does not decode, raises PayloadError so that the sender gets an answer, where a
        payload 1,000 levels deep once reached the journal's encoder and killed the broker (issue 41)."""
        if too_deep(frame, MAX_DEPTH + 1):  # the message is an object around its payload: one level more
            reason = f"payload: {depth_problem()}"
        else:
            try:
                return cls.decode(frame)
            except ProtocolError as exc:
                reason = f"payload: {exc}"
        at = frame.find(b',"p":')  # the payload is the last member (`encode`): the header is what precedes it
        header = frame[:at] + b"}" if at > 0 else b""
        if not header or too_deep(header, 2):
            raise ProtocolError(reason)  # no header to answer
        raise PayloadError(cls.decode(header), reason)

    @classmethod
    def decode(cls, frame: bytes) -> Message:
        try:
            body = orjson.loads(frame)  # every message: 2-3x json's speed (issue 27: listings of 5,000 jobs)
        except (ValueError, UnicodeDecodeError) as exc:
            raise ProtocolError(f"undecodable frame: {exc}") from None
        if not isinstance(body, dict) or body.get("t") not in TYPES or not isinstance(body.get("topic"), str):
            raise ProtocolError("frame is not a message")
        payload = body.get("p", {})
        route = body.get("r", [])
        if not isinstance(payload, dict) or not isinstance(route, list):
            raise ProtocolError("malformed payload or route")
        try:
            return cls(
                type=body["t"],
                topic=body["topic"],
                payload=payload,
                nodeid=int(body.get("n", NODEID_ANY)),
                matchtag=int(body.get("m", 0)),
                route=[str(hop) for hop in route],
                errnum=int(body.get("e", 0)),
                errstr=str(body.get("es", "")),
                seq=int(body.get("s", 0)),
                sender=int(body.get("f", -1)),
            )
        except (TypeError, ValueError) as exc:
            raise ProtocolError(f"malformed field: {exc}") from None

    def response(self, payload: dict[str, Any] | None = None) -> Message:  # open: any message's payload
        """A success response that will retrace this request's route."""
        return Message(RESPONSE, self.topic, payload or {}, matchtag=self.matchtag, route=list(self.route))

    def error(self, errnum: int, errstr: str) -> Message:
        """An error response (errnum is an errno value, errstr a human-readable reason)."""
        return Message(
            RESPONSE, self.topic, {}, matchtag=self.matchtag, route=list(self.route), errnum=errnum, errstr=errstr
        )


# open: any message's payload
def request(topic: str, payload: dict[str, Any] | None = None, nodeid: int = NODEID_ANY, matchtag: int = 0) -> Message:
    return Message(REQUEST, topic, payload or {}, nodeid=nodeid, matchtag=matchtag)


def control(topic: str, payload: ControlPayload | None = None, sender: int = -1) -> Message:
    """An overlay control message (hello, welcome, update, heartbeat...), or a client's disconnect."""
    return Message(CONTROL, topic, dict(payload or {}), sender=sender)
