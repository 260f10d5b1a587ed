"""EASY on random workloads: with exact requested times, a reservation is never delayed by backfilling (the
reserved job starts no later than promised), and the machine is never oversubscribed."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from elasticity.policy.scheduling import Decisions, Snapshot, policy_named
from elasticity.sim.builders import rigid_job, workload
from elasticity.sim.engine import simulate

jobs_strategy = st.lists(
    st.tuples(st.integers(0, 50), st.integers(1, 8), st.integers(1, 40)),  # submit, nodes, run time
    min_size=1,
    max_size=25,
)


@settings(max_examples=150, deadline=None)
@given(jobs_strategy)
def test_reservations_hold_and_nodes_suffice(specs: list[tuple[int, int, int]]) -> None:
    easy = policy_named("easy")
    promised: dict[int, float] = {}

    def spy(snapshot: Snapshot) -> Decisions:
        decisions = easy(snapshot)
        if decisions.reservation is not None:
            job = decisions.reservation.job
            promised[job] = min(promised.get(job, decisions.reservation.at), decisions.reservation.at)
        return decisions

    jobs = [rigid_job(i + 1, float(s), n, float(r)) for i, (s, n, r) in enumerate(sorted(specs))]
    result = simulate(workload(8, *jobs), spy)
    starts = {index: record.start for index, record in enumerate(result.records)}
    for index, at in promised.items():
        assert starts[index] <= at + 1e-9, (index, starts[index], at)
    assert all(0 <= busy <= 8 for _, busy in result.busy)
    for record in result.records:
        assert record.start >= record.submit and record.end - record.start == record.node_seconds / record.nodes
