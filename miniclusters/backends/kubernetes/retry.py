"""Client-side retries for transient API errors (429 throttling, 5xx, lost connections), with back-off.

Sleep is injected so tests never wait. The operator does not use this: it requeues with its own rate limiter.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from miniclusters.backends.kubernetes.api import ApiError

T = TypeVar("T")


def backoff_delays(attempts: int, base: float = 0.25, cap: float = 8.0) -> list[float]:
    return [min(cap, base * 2**i) for i in range(attempts - 1)]


def with_retries(call: Callable[[], T], attempts: int = 5, sleep: Callable[[float], None] = time.sleep) -> T:
    """call(), retried on transient ApiErrors with exponential back-off; other errors pass straight through."""
    delays = backoff_delays(attempts)
    for delay in delays:
        try:
            return call()
        except ApiError as exc:
            if not exc.transient:
                raise
            sleep(delay)
    return call()
