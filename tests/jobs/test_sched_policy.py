"""Scheduler policies on small hand-checked snapshots, plus invariants under random queues."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.jobs.jobspec import ResourceRequest
from elasticity.policy.allocate import NodeCapacity, allocate, never_fits
from elasticity.policy.queue import Plan, Running, Snapshot, Waiting, plan


def _nodes(n: int, cores: int = 4, down: tuple[int, ...] = ()) -> dict[int, NodeCapacity]:
    return {r: NodeCapacity(r, frozenset(range(cores)), up=r not in down) for r in range(n)}


def _snapshot(nodes: dict[int, NodeCapacity], running: list[Running] = (), now: float = 0.0) -> Snapshot:  # type: ignore[assignment]
    free = {r: n.cores for r, n in nodes.items()}
    for run in running:
        for rank, cores in run.allocation.items():
            free[rank] = free[rank] - frozenset(cores)
    return Snapshot(nodes, free, list(running), now)


def test_node_requests_spread_tasks_over_distinct_nodes() -> None:
    nodes = _nodes(3)
    allocation = allocate(ResourceRequest(ntasks=4, nnodes=2), {r: n.cores for r, n in nodes.items()}, nodes)
    assert allocation == {0: [0, 1], 1: [0, 1]}


def test_slot_requests_pack_lowest_ranks_first() -> None:
    nodes = _nodes(2)
    allocation = allocate(ResourceRequest(ntasks=5), {r: n.cores for r, n in nodes.items()}, nodes)
    assert allocation == {0: [0, 1, 2, 3], 1: [0]}


def test_down_ranks_are_not_used_and_exclusive_needs_idle_nodes() -> None:
    nodes = _nodes(3, down=(1,))
    free = {0: frozenset({1, 2, 3}), 1: frozenset(range(4)), 2: frozenset(range(4))}
    assert allocate(ResourceRequest(ntasks=1, nnodes=1, exclusive=True), free, nodes) == {2: [0, 1, 2, 3]}
    assert allocate(ResourceRequest(ntasks=2, nnodes=2, exclusive=True), free, nodes) is None


def test_never_fits_reasons() -> None:
    nodes = _nodes(2)
    assert "at most 4" in (never_fits(ResourceRequest(ntasks=5, nnodes=5), nodes, max_size=4) or "")
    assert "cores per task" in (never_fits(ResourceRequest(ntasks=1, cores_per_task=8), nodes, 4) or "")
    # fits once down ranks (2..3 of maxSize 4) join: not rejected
    assert never_fits(ResourceRequest(ntasks=4, nnodes=4), nodes, max_size=4) is None


def test_fcfs_blocks_behind_the_head() -> None:
    nodes = _nodes(2)
    running = [Running(1, {0: [0, 1, 2, 3]}, expected_end=100)]
    queue = [Waiting(2, ResourceRequest(ntasks=8), 10), Waiting(3, ResourceRequest(ntasks=1), 10)]
    result = plan(queue, _snapshot(nodes, running), "fcfs")
    assert result.start == []


def test_easy_backfills_a_short_job_before_the_reservation() -> None:
    nodes = _nodes(2)
    running = [Running(1, {0: [0, 1, 2, 3]}, expected_end=100)]
    queue = [
        Waiting(2, ResourceRequest(ntasks=8), 10),  # needs both nodes: reserved at t=100
        Waiting(3, ResourceRequest(ntasks=2), 50),  # ends at 50 < 100: backfills
        Waiting(4, ResourceRequest(ntasks=2), 500),  # would still run at 100 on reserved cores: waits
    ]
    result = plan(queue, _snapshot(nodes, running), "easy")
    assert [jobid for jobid, _ in result.start] == [3]
    assert result.reservation is not None and result.reservation.jobid == 2 and result.reservation.start == 100


def test_easy_backfills_a_long_job_outside_the_reserved_cores() -> None:
    nodes = _nodes(3)
    running = [Running(1, {0: [0, 1, 2, 3]}, expected_end=100), Running(5, {1: [0, 1]}, expected_end=200)]
    queue = [
        Waiting(2, ResourceRequest(ntasks=2, nnodes=2, exclusive=True), 10),  # needs 2 idle nodes: only node 2 now
        Waiting(3, ResourceRequest(ntasks=2), 0),  # unlimited, fits on node 1's free cores: not reserved
        Waiting(4, ResourceRequest(ntasks=1), 0),  # unlimited, only node 2 is left and it is reserved
    ]
    result = plan(queue, _snapshot(nodes, running), "easy")
    assert result.reservation is not None
    assert result.reservation.start == 100 and sorted(result.reservation.allocation) == [0, 2]
    assert result.start == [(3, {1: [2, 3]})]
    assert plan(queue, _snapshot(nodes, running), "fcfs").start == []


def _random_queue(draw_sizes: list[tuple[int, int]]) -> list[Waiting]:
    return [Waiting(i + 10, ResourceRequest(ntasks=n), float(d)) for i, (n, d) in enumerate(draw_sizes)]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 12), st.integers(0, 200)), min_size=1, max_size=8),
    st.integers(0, 3),
    st.sampled_from(["fcfs", "easy"]),
)
def test_plans_never_overcommit_and_fcfs_is_a_prefix(sizes: list[tuple[int, int]], busy: int, policy: str) -> None:
    nodes = _nodes(3)
    running = [Running(1, {0: list(range(busy))}, 50)] if busy else []
    snapshot = _snapshot(nodes, running)
    queue = _random_queue(sizes)
    result: Plan = plan(queue, snapshot, policy)  # type: ignore[arg-type]
    used: dict[int, set[int]] = {}
    for _, allocation in result.start:
        for rank, cores in allocation.items():
            assert not used.setdefault(rank, set()) & set(cores), "a core was given twice"
            assert set(cores) <= snapshot.free[rank]
            used[rank] |= set(cores)
    started = [jobid for jobid, _ in result.start]
    if policy == "fcfs":
        assert started == [job.jobid for job in queue[: len(started)]]
    # the head of the queue always starts if it fits on its own
    if allocate(queue[0].request, snapshot.free, nodes) is not None:
        assert started and started[0] == queue[0].jobid
