"""A work queue of cluster keys with per-key exponential back-off (like client-go's rate-limited queue).

A key is queued at most once; a key added while it is being processed runs again afterwards, so no change
is lost and no two workers reconcile the same cluster at once. The clock is injected for tests.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class WorkQueue(Generic[K]):
    def __init__(self, clock: Callable[[], float], base_delay: float = 0.05, max_delay: float = 300.0) -> None:
        self.clock = clock
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._due: dict[K, float] = {}
        self._failures: dict[K, int] = {}
        self._processing: set[K] = set()
        self._again: dict[K, float] = {}
        self._changed = threading.Condition()

    def add(self, key: K) -> None:
        self.add_after(key, 0.0)

    def add_after(self, key: K, delay: float) -> None:
        with self._changed:
            when = self.clock() + max(0.0, delay)
            if key in self._processing:
                self._again[key] = min(when, self._again.get(key, when))
            else:
                self._due[key] = min(when, self._due.get(key, when))
            self._changed.notify_all()

    def add_rate_limited(self, key: K) -> float:
        """Requeue after base * 2^failures (capped); returns the delay used."""
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        delay = min(self.max_delay, self.base_delay * 2.0**failures)
        self.add_after(key, delay)
        return delay

    def forget(self, key: K) -> None:
        self._failures.pop(key, None)

    def failures(self, key: K) -> int:
        return self._failures.get(key, 0)

    def pop(self) -> K | None:
        """The earliest due key (marked in progress), or None when nothing is due now."""
        with self._changed:
            now = self.clock()
            ready = [(when, str(key), key) for key, when in self._due.items() if when <= now]
            if not ready:
                return None
            _, _, key = min(ready)
            del self._due[key]
            self._processing.add(key)
            return key

    def done(self, key: K) -> None:
        with self._changed:
            self._processing.discard(key)
            if key in self._again:
                when = self._again.pop(key)
                self._due[key] = min(when, self._due.get(key, when))
                self._changed.notify_all()

    def next_due(self) -> float | None:
        with self._changed:
            return min(self._due.values()) if self._due else None

    def wait(self, timeout: float) -> None:
        """Block until something is added or timeout passes (real time; only the run loop calls this)."""
        with self._changed:
            self._changed.wait(timeout)

    def __len__(self) -> int:
        return len(self._due)
