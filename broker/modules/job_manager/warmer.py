"""Jobs' listing views rendered ahead, while the loop has time (issue 27: a detailed listing of 5,000 jobs in
under 100 ms; rendering them in the listing itself took 470 ms, about 90 us a job).

Jobs touched by a commit wait WARM_DELAY, so that one that moves on at once (scheduled, run, ended within it) is
rendered once, as it then is; then they are rendered WARM_BATCH at a time with the loop polling its sockets
between batches, so a message waits one batch at most. Only the kinds of view someone has listed are rendered
(Queries says which): an instance nobody lists pays nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ...loop import Timer, Timers

WARM_DELAY = 0.05
"""Seconds a touched job waits before its views are rendered."""
WARM_BATCH = 48
"""Jobs rendered per turn of the loop (about 4 ms here)."""
WARM_PAUSE = 0.001
"""Seconds between turns: a timer due at once would run again before the loop polls its sockets."""


class ViewWarmer:
    """Owns the kinds of view listed so far and the queue of jobs whose views are to be rendered; `render`
    renders one job's views of the given kinds (Queries.render_ahead)."""

    def __init__(self, loop: Timers, render: Callable[[int, frozenset[str]], None]) -> None:
        self._loop = loop
        self._render = render
        self._kinds: frozenset[str] = frozenset()
        self._waiting: dict[int, None] = {}  # insertion-ordered and without repeats
        self._timer: Timer | None = None

    def listed(self, kind: str) -> None:
        """Someone listed this kind of view: from now on it is rendered ahead."""
        if kind not in self._kinds:
            self._kinds = self._kinds | {kind}

    def touched(self, jobids: Iterable[int]) -> None:
        if not self._kinds:
            return  # nobody lists: nothing to render ahead
        self._waiting.update(dict.fromkeys(jobids))
        if self._timer is None and self._waiting:
            self._timer = self._loop.call_later(WARM_DELAY, self._run)

    @property
    def pending(self) -> int:
        return len(self._waiting)

    def _run(self) -> None:
        self._timer = None
        for _ in range(min(WARM_BATCH, len(self._waiting))):
            jobid = next(iter(self._waiting))
            del self._waiting[jobid]
            self._render(jobid, self._kinds)
        if self._waiting:
            self._timer = self._loop.call_later(WARM_PAUSE, self._run)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._waiting.clear()
