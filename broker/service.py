"""RPC service registry: topic -> handler. The broker's built-ins and later modules (job manager) plug in here.

A handler receives a Request and either returns a payload dict (responded at once), returns None after
calling request.respond()/error() itself, or keeps the Request to respond later (deferred replies).
Raising ServiceError sends an error response.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any

from .errors import BrokerBaseError
from .protocol import EINVAL, EPROTO, Message


class ServiceError(BrokerBaseError):
    """Raise from a handler to answer with errnum/message."""

    def __init__(self, errnum: int, message: str) -> None:
        super().__init__(message)
        self.errnum = errnum
        self.message = message


class Request:
    """One received request; respond exactly once (later is fine: keep the object)."""

    __slots__ = ("_send", "msg", "origin", "responded")

    def __init__(self, msg: Message, send: Callable[[Message], None]) -> None:
        self.msg = msg
        self._send = send
        self.responded = False
        self.origin = tuple(msg.route)  # who asked, by the route it came in on (Router.on_client_gone)

    @property
    def topic(self) -> str:
        return self.msg.topic

    @property
    def payload(self) -> dict[str, Any]:  # open: any request's payload
        return self.msg.payload

    @property
    def sender(self) -> int:
        """Rank of the broker where the request entered the overlay."""
        return self.msg.sender

    @property
    def from_local_client(self) -> bool:
        return len(self.msg.route) == 1 and self.msg.route[0].startswith("c:")

    @property
    def client_id(self) -> str | None:
        return self.msg.route[0][2:] if self.from_local_client else None

    def get(self, key: str, kind: type, required: bool = True, default: Any = None) -> Any:
        """A payload field of the given type, or a ServiceError(EINVAL) naming it."""
        if key not in self.payload:
            if required:
                raise ServiceError(EINVAL, f"{self.topic}: missing '{key}'")
            return default
        value = self.payload[key]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise ServiceError(EINVAL, f"{self.topic}: '{key}' must be {kind.__name__}")
        return value

    def respond(self, payload: Mapping[str, Any] | None = None) -> None:  # open: any service's reply (TypedDicts)
        if not self.responded:
            self.responded = True
            body = payload if payload is None or isinstance(payload, dict) else dict(payload)
            self._send(self.msg.response(body))

    def respond_encoded(self, payload: str) -> None:
        """Respond with a payload that is JSON text already (a JSON object; see Message.encoded_payload)."""
        if not self.responded:
            self.responded = True
            response = self.msg.response()
            response.encoded_payload = payload
            self._send(response)

    def error(self, errnum: int, errstr: str) -> None:
        if not self.responded:
            self.responded = True
            self._send(self.msg.error(errnum, errstr))


Handler = Callable[[Request], "Mapping[str, Any] | None"]  # open: each service's reply; each has its TypedDict


class ServiceRegistry:
    """Exact topics ("job-manager.submit") or whole services ("job-manager.*")."""

    def __init__(self) -> None:
        self._handlers: dict[str, Handler] = {}

    def register(self, topic: str, handler: Handler) -> None:
        if topic in self._handlers:
            raise ValueError(f"service topic {topic!r} is already registered")
        self._handlers[topic] = handler

    def unregister(self, topic: str) -> None:
        self._handlers.pop(topic, None)

    def lookup(self, topic: str) -> Handler | None:
        handler = self._handlers.get(topic)
        if handler is not None:
            return handler
        service = topic
        while "." in service:
            service = service.rsplit(".", 1)[0]
            handler = self._handlers.get(service + ".*")
            if handler is not None:
                return handler
        return None

    def topics(self) -> list[str]:
        return sorted(self._handlers)

    def dispatch(self, handler: Handler, request: Request) -> None:
        """Run a handler, turning its return value or exception into the response."""
        try:
            result = handler(request)
        except ServiceError as exc:
            request.error(exc.errnum, exc.message)
            return
        except Exception as exc:  # a handler bug must not take the broker down
            print(f"flux-broker: handler for {request.topic} failed: {exc!r}", file=sys.stderr)
            request.error(EPROTO, f"{request.topic}: internal error: {exc}")
            return
        if result is not None:
            request.respond(result)
