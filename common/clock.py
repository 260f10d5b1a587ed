"""Injected clocks: loops and controllers take one of these instead of calling `time` themselves, so tests and
the simulator can drive them."""

from __future__ import annotations

from collections.abc import Callable

Clock = Callable[[], float]
"""Seconds as a float, only differences meaningful (`time.monotonic` in production)."""

Sleep = Callable[[float], None]
"""Waits the given seconds (`time.sleep` in production)."""
