"""The warmer (broker/modules/job_manager/warmer.py) on a real Loop: once a kind of view was listed, touched jobs
are rendered once each, in order, after a delay and in batches that let the loop's other work run between them."""

from __future__ import annotations

from broker.loop import Loop
from broker.modules.job_manager import warmer
from broker.modules.job_manager.warmer import ViewWarmer


def test_touched_jobs_are_rendered_once_each_in_batches() -> None:
    loop = Loop()
    rendered: list[int] = []
    turns: list[int] = []  # how many were rendered when each tick of other work ran
    kinds_seen: set[frozenset[str]] = set()

    def render(jobid: int, kinds: frozenset[str]) -> None:
        rendered.append(jobid)
        kinds_seen.add(kinds)

    view_warmer = ViewWarmer(loop, render)
    view_warmer.touched([7, 8])
    assert view_warmer.pending == 0  # no kind listed yet: nothing to render ahead
    view_warmer.listed("restful")
    view_warmer.listed("restful")
    view_warmer.touched([3, 1, 2])
    view_warmer.touched(range(200))  # 1, 2 and 3 again: each stays once, where it first came
    assert view_warmer.pending == 200 and rendered == []

    def tick() -> None:
        turns.append(len(rendered))
        if view_warmer.pending == 0 and rendered:
            loop.stop()

    loop.call_every(0.0005, tick)
    loop.run()
    assert rendered == [3, 1, 2, 0, *range(4, 200)]
    assert kinds_seen == {frozenset({"restful"})}
    assert view_warmer.pending == 0
    batches = sorted(set(turns))
    assert batches[0] == 0  # the delay first
    assert all(b % warmer.WARM_BATCH == 0 or b == 200 for b in batches)  # other work ran between batches
    assert len([b for b in batches if b]) >= 200 // warmer.WARM_BATCH


def test_close_drops_what_was_not_rendered() -> None:
    loop = Loop()
    rendered: list[int] = []
    view_warmer = ViewWarmer(loop, lambda jobid, _kinds: rendered.append(jobid))
    view_warmer.listed("job-list")
    view_warmer.touched(range(10))
    view_warmer.close()
    loop.call_later(warmer.WARM_DELAY * 3, loop.stop)
    loop.run()
    assert rendered == [] and view_warmer.pending == 0
