"""Reads go first: a submit waits (briefly, boundedly) while a read of a job is being answered.

Why: the REST server does every request's work on one event loop. Under a stream of concurrent submits the
loop is busy all the time (each submit parses its parameters, builds a jobspec, encodes it: a few hundred
microseconds to a millisecond of CPU), and a GET of a job, served first come first served, waits its turn
behind several of them: measured, its median went from 3 ms to 13 ms while 4 clients submitted (issue 30),
although its own work is small. Reading a job is what people and dashboards wait on; a submit is throughput
work whose client already waits milliseconds for the journal's fsync. So a submit about to do its work first
lets the reads in progress finish, up to MAX_WAIT; a read never waits for a submit. Nothing is refused and
nothing reordered among submits; under a flood of reads a submit is delayed at most MAX_WAIT.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

MAX_WAIT = 0.02
"""Seconds a submit may wait for reads (so that a flood of reads can slow submits, never stop them)."""


class ReadsFirst:
    """Counts reads in progress on one event loop; `turn` lets a submit go once there are none."""

    def __init__(self, max_wait: float = MAX_WAIT) -> None:
        self.max_wait = max_wait
        self.reading = 0
        self._quiet: asyncio.Event | None = None  # made on the loop, at first use

    def _event(self) -> asyncio.Event:
        if self._quiet is None:
            self._quiet = asyncio.Event()
            self._quiet.set()
        return self._quiet

    @contextlib.asynccontextmanager
    async def read(self) -> AsyncIterator[None]:
        """Around a read's work: submits arriving meanwhile wait for it."""
        quiet = self._event()
        self.reading += 1
        quiet.clear()
        try:
            yield
        finally:
            self.reading -= 1
            if not self.reading:
                quiet.set()

    async def turn(self) -> None:
        """Before a submit's work: wait until no read is in progress, or MAX_WAIT, whichever comes first."""
        quiet = self._event()
        if quiet.is_set():
            return
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(quiet.wait(), self.max_wait)
