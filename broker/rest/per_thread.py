"""One connection per worker thread: how the REST server shares an instance's handle between threads.

Neither a flux-core Python handle nor our broker's client is thread-safe, and every blocking call to the
instance runs in a worker thread (never on the event loop), many at a time. Serialising every call through one
handle would make a slow call (a submit) hold up every other request, which is the delay this design avoids;
a handle per thread lets the instance answer concurrent requests concurrently, as flux-restful does.

The worker pool retires idle threads (anyio stops a worker idle for 10 s), so a handle is closed when its
thread ends, not kept open for a thread that will never come back; `close` closes whatever is left at shutdown.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class _Slot(Generic[T]):
    """What a thread's local storage holds: when the thread ends, the slot goes and its finalizer closes `value`."""

    __slots__ = ("__weakref__", "value")

    def __init__(self, value: T) -> None:
        self.value = value


class PerThread(Generic[T]):
    """A resource made on first use in each thread and closed when that thread ends (or at `close`)."""

    def __init__(self, make: Callable[[], T], close: Callable[[T], object]) -> None:
        self._make = make
        self._close = close
        self._local = threading.local()
        self._lock = threading.Lock()
        self._finalizers: list[weakref.finalize[[T], _Slot[T]]] = []

    def get(self) -> T:
        slot: _Slot[T] | None = getattr(self._local, "slot", None)
        if slot is None:
            slot = _Slot(self._make())
            finalizer = weakref.finalize(slot, self._close, slot.value)
            with self._lock:
                self._finalizers = [f for f in self._finalizers if f.alive]
                self._finalizers.append(finalizer)
            self._local.slot = slot
        return slot.value

    def live(self) -> int:
        """How many threads hold one now (tests check that retired threads' resources are closed)."""
        with self._lock:
            return sum(f.alive for f in self._finalizers)

    def close(self) -> None:
        """Close every thread's resource (at shutdown: no thread may use one afterwards)."""
        with self._lock:
            finalizers, self._finalizers = self._finalizers, []
        for finalizer in finalizers:
            finalizer()
        self._local = threading.local()
