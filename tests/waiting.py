"""The tests' one way to wait for something to happen: poll for the state, with a deadline, and fail naming what
was awaited. A bare `time.sleep(x)` before an assertion is a guess at how long the machine takes (too short on a
loaded CI worker, too long everywhere else); tests/test_waiting.py refuses one that is not marked `# sleep: <why>`
(a sleep whose point is letting time pass: a duty cycle, a rate, a load generator's pace)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

INTERVAL = 0.05
"""Seconds between two looks: short against the states awaited (process starts, files, job events)."""


def wait_until(
    what: str,
    check: Callable[[], T | None],
    timeout: float = 30.0,
    interval: float = INTERVAL,
    detail: Callable[[], object] | None = None,
) -> T:
    """``check()``'s first truthy value; an AssertionError naming ``what`` (and saying ``detail()``, the state last
    seen) when ``timeout`` seconds pass first."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() >= deadline:
            said = f": {detail()}" if detail is not None else ""
            raise AssertionError(f"not within {timeout:g}s: {what}{said}")
        time.sleep(interval)  # sleep: the pace of the polling


def holds_for(what: str, check: Callable[[], object], seconds: float, interval: float = INTERVAL) -> None:
    """``check()`` stays truthy for ``seconds`` (a thing that must NOT happen: no restart within the back-off, a
    job still pending); an AssertionError naming ``what`` at the first look that finds it false."""
    deadline = time.monotonic() + seconds
    while True:
        if not check():
            raise AssertionError(f"no longer true: {what}")
        if time.monotonic() >= deadline:
            return
        time.sleep(interval)  # sleep: the time that must pass without the thing happening


async def async_wait_until(
    what: str, check: Callable[[], T | None], timeout: float = 30.0, interval: float = INTERVAL
) -> T:
    """`wait_until` inside an event loop: the loop runs (the awaited state may depend on it) between two looks."""

    async def look() -> T | None:
        return check()

    return await async_wait_until_answered(what, look, timeout, interval)


async def async_wait_until_answered(
    what: str, ask: Callable[[], Awaitable[T | None]], timeout: float = 30.0, interval: float = INTERVAL
) -> T:
    """`async_wait_until` with a look that is itself awaited (a question over the wire)."""
    deadline = time.monotonic() + timeout
    while True:
        value = await ask()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"not within {timeout:g}s: {what}")
        await asyncio.sleep(interval)  # sleep: the pace of the polling
