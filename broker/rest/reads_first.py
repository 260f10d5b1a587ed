"""Reads go first: a submit waits (briefly, boundedly) while a read of a job is being answered.

Why: the REST server does every request's work on one event loop. Under a stream of concurrent submits the
loop is busy all the time (each submit parses its parameters, builds a jobspec, encodes it: a few hundred
microseconds to a millisecond of CPU), and a GET of a job, served first come first served, waits its turn
behind several of them: measured, its median went from 3 ms to 13 ms while 4 clients submitted (issue 30),
although its own work is small. Reading a job is what people and dashboards wait on; a submit is throughput
work whose client already waits milliseconds for the journal's fsync. So a submit about to do its work first
lets the reads in progress finish, up to MAX_WAIT; a read never waits for a submit. Nothing is refused and
nothing reordered among submits; under a flood of reads a submit is delayed at most MAX_WAIT.

Submits also take their turns one at a time, and each lets the loop go round ARRIVAL_TURNS times first. Why:
a submit's work (up to its send to the broker) has no pause in it, so submits that arrived together used to
run back to back in one pass of the loop, and a GET that arrived meanwhile was not even parsed until all of
them were done; nor could it count as a read in progress before its task had started. Measured with 4
clients submitting (bench/bench_rest.py), that put a GET behind up to four submits' work. Now a GET that has
arrived is parsed and started before the next submit's work, and from then on goes first as above.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

MAX_WAIT = 0.02
"""Seconds a submit may wait for reads (so that a flood of reads can slow submits, never stop them)."""
ARRIVAL_TURNS = 3
"""Passes of the loop a submit lets go by before its work: the first polls the sockets, the second runs the
HTTP protocol's callbacks (which start a task per request that arrived), the third those tasks' first steps,
where a read of a job counts itself in (`read`)."""


class ReadsFirst:
    """Counts reads in progress on one event loop; `turn` lets a submit go once there are none."""

    def __init__(self, max_wait: float = MAX_WAIT) -> None:
        self.max_wait = max_wait
        self.reading = 0
        self._quiet: asyncio.Event | None = None  # made on the loop, at first use
        self._lane: asyncio.Lock | None = None  # submits' turns, one at a time

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
        """Before a submit's work: wait for the submits ahead, let requests that arrived start, then wait until
        no read is in progress (or MAX_WAIT). The caller's work must follow without a pause (an await that
        suspends), as it does in the submit route up to its send to the broker: the next submit's turn then
        comes only after it."""
        if self._lane is None:
            self._lane = asyncio.Lock()
        async with self._lane:
            for _ in range(ARRIVAL_TURNS):
                await asyncio.sleep(0)
            quiet = self._event()
            if quiet.is_set():
                return
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(quiet.wait(), self.max_wait)
