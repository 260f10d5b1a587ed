"""The malleable strategies and the elastic priority policy on snapshots whose answers are worked out by hand."""

from __future__ import annotations

import math

import pytest

from elasticity.model.speedup import JobSize
from elasticity.policy.scheduling import Decisions, Resize, RunningJob, Snapshot, Start, WaitingJob, policy_named


def running(
    job: int, nodes: int, size: tuple[int, int, int], *, priority: int = 1, last: float = -math.inf
) -> RunningJob:
    return RunningJob(job, nodes, JobSize(*size), 1000.0, priority, last)


def waiting(job: int, size: tuple[int, int, int], *, priority: int = 1) -> WaitingJob:
    return WaitingJob(job, 0.0, JobSize(*size), 100.0, priority)


def decide(policy: str, nodes: int, run: list[RunningJob], wait: list[WaitingJob], now: float = 100.0) -> Decisions:
    return policy_named(policy)(Snapshot(now, nodes, tuple(run), tuple(wait)))


def test_min_shrinks_the_job_furthest_above_its_minimum_to_start_a_waiting_job() -> None:
    # 8 nodes all busy: J1 [1,4,8] at 6 (p = 6-1 = 5), J2 [2,4,8] at 2 (p = 0). W needs 3 (rigid).
    # EASY cannot start W; J1 and J2 could give 5 + 0 >= 3: take 3 from J1 (highest p), start W.
    out = decide("min", 8, [running(1, 6, (1, 4, 8)), running(2, 2, (2, 4, 8))], [waiting(3, (3, 3, 3))])
    assert out.starts == (Start(3, 3),)
    assert out.resizes == (Resize(1, 3),)


def test_a_malleable_waiting_job_starts_at_its_minimum_when_shrinking_cannot_reach_its_preferred_size() -> None:
    # 8 nodes busy: J1 [2,4,8] at 8 (can give 6). W [4,6,8] (min 4): shrink J1 by 4 -> 4, W starts at 4.
    out = decide("avg", 8, [running(1, 8, (2, 4, 8))], [waiting(2, (4, 6, 8))])
    assert out.starts == (Start(2, 4),)
    assert out.resizes == (Resize(1, 4),)


def test_keeppref_only_shrinks_jobs_above_their_preferred_size() -> None:
    # J1 [1,4,8] at 6 can give 2 under KeepPref (down to pref 4), J2 at 2 nothing: 2 < 3 -> nothing happens.
    out = decide("keeppref", 8, [running(1, 6, (1, 4, 8)), running(2, 2, (2, 4, 8))], [waiting(3, (3, 3, 3))])
    assert out == Decisions()


def test_no_shrink_when_it_cannot_start_the_waiting_job() -> None:
    # J1 [4,4,8] at 6 can give 2; W needs 5 with 0 free -> no pointless shrink.
    assert decide("min", 6, [running(1, 6, (4, 4, 8))], [waiting(2, (5, 5, 5))]) == Decisions()


@pytest.mark.parametrize(("strategy", "grown"), [("min", 2), ("avg", 2), ("pref", 1)])
def test_each_strategy_gives_an_idle_node_to_its_lowest_priority_value(strategy: str, grown: int) -> None:
    # 8 nodes, 1 idle. J1 [1,4,8] at 3, J2 [3,4,8] at 4.
    # Min: J1 3-1 = 2, J2 4-3 = 1 -> J2.  Avg: J1 2/7 = .29, J2 1/5 = .2 -> J2.  Pref: J1 3-4 = -1, J2 0 -> J1.
    out = decide(strategy, 8, [running(1, 3, (1, 4, 8)), running(2, 4, (3, 4, 8))], [])
    sizes = {1: 3, 2: 4}
    sizes[grown] += 1
    assert out.resizes == (Resize(grown, sizes[grown]),)


def test_rigid_jobs_are_never_resized_by_a_malleable_strategy() -> None:
    out = decide("min", 8, [running(1, 4, (4, 4, 4))], [])
    assert out.resizes == ()


def test_elastic_shrinks_the_lowest_priority_job_first() -> None:
    # 16 slots busy: L1 pri 1 [2,8] at 8, L2 pri 2 [2,8] at 8. H pri 5 [4,16] needs 4: L1 gives 4.
    out = decide(
        "elastic",
        16,
        [running(1, 8, (2, 2, 8), priority=1), running(2, 8, (2, 2, 8), priority=2)],
        [waiting(3, (4, 4, 16), priority=5)],
    )
    assert out.starts == (Start(3, 4),)
    assert out.resizes == (Resize(1, 4),)


def test_elastic_respects_the_minimum_gap_between_rescales() -> None:
    # As above but L1 was resized 10 s ago (gap 60 s): L2 gives the 4 slots instead.
    out = decide(
        "elastic",
        16,
        [running(1, 8, (2, 2, 8), priority=1, last=90.0), running(2, 8, (2, 2, 8), priority=2)],
        [waiting(3, (4, 4, 16), priority=5)],
    )
    assert out.resizes == (Resize(2, 4),)


def test_elastic_never_shrinks_equal_or_higher_priority_jobs() -> None:
    out = decide("elastic", 8, [running(1, 8, (2, 2, 8), priority=3)], [waiting(2, (2, 2, 8), priority=3)])
    assert out == Decisions()


def test_elastic_gives_freed_slots_in_priority_order_up_to_max() -> None:
    # 14 slots, 6 idle: B (pri 5) grows 4 -> 8 (its max), A (pri 3) gets the other 2: 4 -> 6.
    out = decide("elastic", 14, [running(1, 4, (2, 2, 8), priority=3), running(2, 4, (2, 2, 8), priority=5)], [])
    assert set(out.resizes) == {Resize(1, 6), Resize(2, 8)}


def test_moldable_and_rigid_start_sizes() -> None:
    # 10 free slots, one job [4, 16]: moldable takes 10, rigid-min 4, rigid-max waits (needs 16).
    job = [waiting(1, (4, 4, 16))]
    assert decide("moldable", 10, [], job).starts == (Start(1, 10),)
    assert decide("rigid-min", 10, [], job).starts == (Start(1, 4),)
    assert decide("rigid-max", 10, [], job).starts == ()


def test_priority_queue_is_strict() -> None:
    # 8 free; high-priority job needs 16 (rigid-max) and blocks the low-priority job that would fit.
    jobs = [waiting(1, (2, 2, 4), priority=1), waiting(2, (16, 16, 16), priority=5)]
    assert decide("rigid-max", 8, [running(3, 8, (8, 8, 8))], jobs).starts == ()


def test_unknown_policy_names_the_choices() -> None:
    with pytest.raises(ValueError, match=r"unknown policy 'sjf'.*easy"):
        policy_named("sjf")
