"""EASY and FCFS against schedules derived by hand (the derivations are in the comments).

Every case runs through the event-driven engine, so completions, arrivals and the single pass per event time
are part of what is checked.
"""

from __future__ import annotations

from elasticity.policy.scheduling import policy_named
from elasticity.policy.scheduling.easy import NODES, plan_queue
from elasticity.sim.builders import rigid_job, workload
from elasticity.sim.engine import simulate
from elasticity.sim.workload import SimJob


def schedule(policy: str, nodes: int, *jobs: SimJob) -> dict[int, tuple[float, float]]:
    result = simulate(workload(nodes, *jobs), policy_named(policy), policy_name=policy)
    return {r.job: (r.start, r.end) for r in result.records}


def test_backfill_ends_before_the_reservation_and_a_long_job_must_not_delay_it() -> None:
    # 4 nodes. A (2 nodes, 10 s) starts at 0. B (4 nodes) cannot start: free 2 -> reservation at t=10 when A
    # ends by its requested time. C (2 nodes, 5 s) fits now and ends at 5 <= 10: backfilled, runs 0-5.
    # D (1 node, 20 s) arrives at 1; at t=5 (C done) 2 nodes are free but D would still run at t=10, when B
    # needs all 4 nodes: not backfilled. t=10: A ends, B runs 10-15. t=15: D runs 15-35.
    jobs = (
        rigid_job(1, 0, 2, 10),
        rigid_job(2, 0, 4, 5),
        rigid_job(3, 0, 2, 5),
        rigid_job(4, 1, 1, 20),
    )
    assert schedule("easy", 4, *jobs) == {1: (0, 10), 2: (10, 15), 3: (0, 5), 4: (15, 35)}
    # FCFS on the same jobs: nothing passes B. t=10 B runs 10-15; t=15 C (15-20) and D (15-35).
    assert schedule("fcfs", 4, *jobs) == {1: (0, 10), 2: (10, 15), 3: (15, 20), 4: (15, 35)}


def test_long_backfill_on_nodes_the_reservation_does_not_need() -> None:
    # 6 nodes. A (4 nodes, 10 s) runs 0-10. B (4 nodes, 5 s) cannot start (2 free); reservation at t=10, when
    # 2 + 4 = 6 nodes are free and B needs 4: 2 spare. C (2 nodes, 100 s) runs past t=10 but only on the 2
    # spare nodes: backfilled 0-100. D (1 node, 1 s): nothing free until B ends. t=10 B runs 10-15 (not
    # delayed); t=15 D runs 15-16.
    jobs = (
        rigid_job(1, 0, 4, 10),
        rigid_job(2, 0, 4, 5),
        rigid_job(3, 0, 2, 100),
        rigid_job(4, 0, 1, 1),
    )
    assert schedule("easy", 6, *jobs) == {1: (0, 10), 2: (10, 15), 3: (0, 100), 4: (15, 16)}


def test_jobs_ending_before_their_requested_time_move_the_reservation_forward() -> None:
    # 4 nodes. A (3 nodes) requests 10 s but runs 4 s: 0-4. B (4 nodes, 6 s) arrives at 1: reservation at 10
    # (A's requested end). C (1 node, 5 s) arrives at 2: ends at 7 <= 10, backfilled 2-7. t=4 A ends early:
    # 3 free, B still waits for C; the reservation is now t=7 (C's requested end). t=7: B runs 7-13.
    jobs = (
        rigid_job(1, 0, 3, 4, estimate=10),
        rigid_job(2, 1, 4, 6),
        rigid_job(3, 2, 1, 5),
    )
    assert schedule("easy", 4, *jobs) == {1: (0, 4), 2: (7, 13), 3: (2, 7)}


def test_a_backfill_whose_estimate_is_past_the_reservation_is_refused_even_if_it_would_end_early() -> None:
    # 4 nodes. A (2 nodes, 10 s). B (4 nodes, 2 s): reservation at 10. C (2 nodes) runs only 3 s but requests
    # 20 s: by its requested time it would hold 2 nodes past t=10, which B needs -> not backfilled.
    # t=10: B runs 10-12; t=12: C runs 12-15.
    jobs = (
        rigid_job(1, 0, 2, 10),
        rigid_job(2, 0, 4, 2),
        rigid_job(3, 0, 2, 3, estimate=20),
    )
    assert schedule("easy", 4, *jobs) == {1: (0, 10), 2: (10, 12), 3: (12, 15)}


def test_plan_queue_reports_the_reservation() -> None:
    # Free 2 of 4; running jobs of 2 nodes end at 10. Queue: 4 nodes (reserved at 10), 1 node for 5 s (ends 5,
    # backfilled), 2 nodes for 50 s (past 10 with no spare node at 10: refused).
    plan = plan_queue([(4, 3.0), (1, 5.0), (2, 50.0)], [(2, 10.0)], 2, 0.0, NODES)
    assert plan.starts == [(1, 1)]
    assert plan.reservation is not None
    assert (plan.reservation.index, plan.reservation.start) == (0, 10.0)
