"""A broker module loaded at its service's first request instead of at start (issue 45, an idle broker's memory).

A module whose imports an idle broker never runs (the job manager's parts, job exec's launch code) registers a
stand-in for its whole service (`job-manager.*`): the first request imports and makes the module, which registers
its own topics, and is handed to it; later requests reach those topics directly. A load that fails answers that
request and every later one with what could not load (logged once): never a silent drop.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from ..port import ModulePort
from ..protocol import ENOSYS
from ..service import Handler, Request, ServiceError

Loader = Callable[[], Mapping[str, Handler]]
"""Imports and makes the module (which registers its topics), and returns its handlers by topic."""


class LoadOnFirstRequest:
    """Serves `<service>.*` until a request comes: that one loads the module and is handed to it."""

    def __init__(self, broker: ModulePort, service: str, load: Loader) -> None:
        self._broker = broker
        self._service = service
        self._load = load
        self._handlers: Mapping[str, Handler] | None = None
        self._failure = ""
        broker.register(f"{service}.*", self.serve)

    @property
    def loaded(self) -> bool:
        return self._handlers is not None

    def serve(self, request: Request) -> Mapping[str, Any] | None:  # open: whichever service's reply
        handler = self.handlers().get(request.topic)
        if handler is None:  # once loaded, only topics the module does not serve come here
            raise ServiceError(ENOSYS, f"{request.topic}: no such service on rank {self._broker.rank}")
        return handler(request)

    def handlers(self) -> Mapping[str, Handler]:
        if self._handlers is not None:
            return self._handlers
        if self._failure:
            raise ServiceError(ENOSYS, self._failure)
        try:
            self._handlers = self._load()
        except Exception as exc:  # whatever the import or the module raised: said at this request and the next
            self._failure = f"{self._service} could not be loaded on first use: {exc!r}"
            self._broker.log(self._failure)
            raise ServiceError(ENOSYS, self._failure) from None
        return self._handlers


def settings_under(broker: ModulePort, prefixes: tuple[str, ...]) -> bool:
    """Whether any broker attribute is set under these prefixes (settings a module checks as it is made, so that a
    bad value still refuses the start)."""
    return any(name.startswith(prefixes) for name, _value in broker.attrs.items())


def holds_anything(path: str) -> bool:
    """Whether a directory exists with anything in it (what a module must read at start); an unreadable path or
    one that is no directory counts, so that the module says what is wrong with it at start, as before."""
    try:
        with os.scandir(path) as entries:
            return any(True for _entry in entries)
    except FileNotFoundError:
        return False
    except OSError:
        return True
