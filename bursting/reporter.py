"""The burst service tells the lead its own state (running, or failed and why) every few seconds.

From a thread of its own: a step may take long (a plugin creating pods, an API that does not answer) and a live
service must not look gone meanwhile; only a dead or hung process stops reporting, and the lead then shows the
service as stopped (broker/burst_service.py), so a killed service is never mistaken for a working one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from broker.burst_service import RUNNING

REPORT_PERIOD = 2.0
STALE_AFTER = 15.0
"""Told to the lead with each report: how long without one means the service is gone."""

Send = Callable[[str, str], None]
"""(state, reason) -> None once the lead has it; raises ConnectionError (or OSError) when it is not reachable."""


class Reporter:
    """Sends the current state every `period` seconds, and at once when it changes."""

    def __init__(self, send: Send, period: float = REPORT_PERIOD) -> None:
        self._send = send
        self.period = period
        self._state = (RUNNING, "")
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="burst-service-reporter", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def set(self, state: str, reason: str = "") -> None:
        with self._lock:
            if self._state == (state, reason):
                return
            self._state = (state, reason)
        self._wake.set()

    def stop(self, state: str, reason: str, timeout: float) -> bool:
        """The last word: `state` is delivered if the lead answers within `timeout` seconds; True if it was."""
        self.set(state, reason)
        self._done.set()
        self._wake.set()
        if not self._thread.is_alive() and not self._thread.ident:
            self._thread.start()
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _loop(self) -> None:
        while True:
            done = self._done.is_set()  # read before the state, so the final state is the one sent last
            self._wake.clear()
            with self._lock:
                state, reason = self._state
            try:
                self._send(state, reason)
            except (ConnectionError, OSError, TimeoutError):
                pass  # the lead is not up yet, or restarting: the next report tells it
            else:
                if done:
                    return
            self._wake.wait(self.period)
