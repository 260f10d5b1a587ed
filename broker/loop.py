"""A small single-threaded reactor over zmq.Poller: readable sockets/fds and timers.

One thread, no asyncio: keeps broker start-up imports and memory small.
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections.abc import Callable
from typing import Any, Protocol

import zmq

Callback = Callable[[], None]


class Timer:
    """A scheduled callback; cancel() prevents it (and, for repeating timers, later runs)."""

    __slots__ = ("callback", "cancelled", "deadline", "interval")

    def __init__(self, deadline: float, callback: Callback, interval: float | None) -> None:
        self.deadline = deadline
        self.callback = callback
        self.interval = interval
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class Timers(Protocol):
    """What a part of a module needs of the loop (timers and readers): the broker's Loop, or a test's fake loop."""

    def add_reader(self, source: Any, callback: Callback) -> None: ...

    def remove_reader(self, source: Any) -> None: ...

    def call_later(self, delay: float, callback: Callback) -> Timer: ...

    def call_every(self, interval: float, callback: Callback) -> Timer: ...


class Loop:
    """Dispatch readable zmq sockets / file descriptors and due timers until stop()."""

    def __init__(self) -> None:
        self._poller = zmq.Poller()
        self._readers: dict[Any, Callback] = {}
        self._timers: list[tuple[float, int, Timer]] = []
        self._counter = itertools.count()
        self._running = False

    def add_reader(self, source: Any, callback: Callback) -> None:
        self._readers[source] = callback
        self._poller.register(source, zmq.POLLIN)

    def remove_reader(self, source: Any) -> None:
        if source in self._readers:
            del self._readers[source]
            self._poller.unregister(source)

    def call_later(self, delay: float, callback: Callback) -> Timer:
        timer = Timer(time.monotonic() + delay, callback, None)
        heapq.heappush(self._timers, (timer.deadline, next(self._counter), timer))
        return timer

    def call_every(self, interval: float, callback: Callback) -> Timer:
        timer = Timer(time.monotonic() + interval, callback, interval)
        heapq.heappush(self._timers, (timer.deadline, next(self._counter), timer))
        return timer

    def stop(self) -> None:
        self._running = False

    def _run_timers(self) -> float | None:
        """Run due timers; return seconds until the next one (None if none)."""
        now = time.monotonic()
        while self._timers:
            deadline, _, timer = self._timers[0]
            if timer.cancelled:
                heapq.heappop(self._timers)
                continue
            if deadline > now:
                return deadline - now
            heapq.heappop(self._timers)
            if timer.interval is not None:
                timer.deadline = max(deadline + timer.interval, now)
                heapq.heappush(self._timers, (timer.deadline, next(self._counter), timer))
            timer.callback()
            if not self._running:
                return None
            now = time.monotonic()
        return None

    def run(self) -> None:
        self._running = True
        while self._running:
            wait = self._run_timers()
            if not self._running:
                break
            timeout_ms = None if wait is None else max(0, int(wait * 1000) + 1)
            for source, _ in self._poller.poll(timeout_ms):
                callback = self._readers.get(source)
                if callback is not None:
                    callback()
                if not self._running:
                    break
