"""One broker message as the lean client commands see it on the wire. The answers they render (`flux resource`,
`flux overlay`, `flux queue`) have their one shape where the broker makes them (broker/payloads.py).

TypedDicts only; a lean command imports this module only for type checking.
"""

from __future__ import annotations

from typing import Any, TypedDict


class WireMessage(TypedDict, total=False):
    """One broker message as JSON on the wire (broker/protocol.py): its kind (req, rsp, evt), topic, matchtag,
    target rank, payload, and on an error response its errno and text."""

    t: str
    topic: str
    m: int
    n: int
    p: dict[str, Any]  # open: the payload, its shape the topic's
    e: int
    es: str
