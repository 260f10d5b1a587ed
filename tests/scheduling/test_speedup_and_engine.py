"""The Amdahl size/runtime model, and how the engine applies it to resized jobs and orders events."""

from __future__ import annotations

import pytest

from elasticity.model.speedup import Amdahl, JobSize, size_range
from elasticity.policy.scheduling import Decisions, Snapshot, Start, policy_named
from elasticity.policy.scheduling.actions import PolicyError
from elasticity.sim.builders import malleable_job, rigid_job, workload
from elasticity.sim.engine import simulate


def test_size_range_from_the_efficiency_threshold_and_slowdown_bound() -> None:
    # s = 0.05: E(n) = 1/(0.05 n + 0.95) >= 0.5  <=>  n <= 21 (E(21) = 0.5 exactly).
    # S(4) = 1/(0.05 + 0.2375) = 3.478; at most 2x slower needs S(n) >= 1.739: S(1) = 1, S(2) = 1.905 -> min 2.
    model = Amdahl(0.05)
    assert size_range(model, 4, 128) == JobSize(2, 4, 21)
    assert model.efficiency(21) == pytest.approx(0.5)
    # The machine caps the maximum; a job already past the efficient size keeps its own size as the maximum.
    assert size_range(model, 4, 16).max == 16
    assert size_range(model, 32, 128).max == 32
    assert size_range(Amdahl(0.0), 8, 64) == JobSize(4, 8, 64)


def test_runtime_model() -> None:
    model = Amdahl(0.1)
    # S(2) = 1/(0.1+0.45) = 1.818, S(8) = 1/(0.1+0.1125) = 4.706: 100 s on 2 -> 100*1.818/4.706 = 38.6 s on 8.
    assert model.runtime(100.0, 2, 8) == pytest.approx(38.64, abs=0.01)
    with pytest.raises(ValueError, match="serial_fraction"):
        Amdahl(1.5)


@pytest.mark.parametrize(("overhead", "end"), [(0.0, 75.0), (10.0, 85.0)])
def test_an_expanded_job_keeps_its_progress(overhead: float, end: float) -> None:
    # 4 nodes. A malleable [1,2,4], 100 s at 2 nodes, perfectly parallel; B rigid 2 nodes for 50 s.
    # t=0 both start at their preferred sizes. t=50 B ends; Min expands A to 4 nodes: half its work is left,
    # at twice the speed -> 25 s more (plus the rescale overhead): ends at 75 (85 with 10 s overhead).
    jobs = (malleable_job(1, 0, (1, 2, 4), 100.0), rigid_job(2, 0, 2, 50.0))
    result = simulate(workload(4, *jobs), policy_named("min"), rescale_overhead=overhead)
    a = next(r for r in result.records if r.job == 1)
    assert (a.start, a.nodes, a.expands) == (0.0, 4, 1) and a.end == pytest.approx(end)
    # Node-seconds: 2 x 50 + 4 x (end - 50).
    assert a.node_seconds == pytest.approx(100 + 4 * (end - 50))


def test_completions_before_arrivals_then_one_pass_per_event_time() -> None:
    # 2 nodes. A (2 nodes) ends at 10, when B and C (2 nodes each) arrive. One pass at t=10 sees A gone and
    # both B and C waiting.
    seen: list[tuple[float, tuple[int, ...], tuple[int, ...]]] = []
    easy = policy_named("easy")

    def spy(snapshot: Snapshot) -> Decisions:
        seen.append((snapshot.now, tuple(r.job for r in snapshot.running), tuple(w.job for w in snapshot.waiting)))
        return easy(snapshot)

    jobs = (rigid_job(1, 0, 2, 10), rigid_job(2, 10, 2, 5), rigid_job(3, 10, 2, 5))
    result = simulate(workload(2, *jobs), spy)
    times = [t for t, _, _ in seen]
    assert len(times) == len(set(times))
    assert (10.0, (), (1, 2)) in seen  # engine indexes: jobs 2 and 3 are indexes 1 and 2
    assert {r.job: r.start for r in result.records} == {1: 0.0, 2: 10.0, 3: 15.0}


def test_a_policy_that_oversubscribes_the_machine_is_an_error() -> None:
    def greedy(snapshot: Snapshot) -> Decisions:
        return Decisions(starts=tuple(Start(w.job, w.size.pref) for w in snapshot.waiting))

    with pytest.raises(PolicyError, match="use 4 of 2 nodes"):
        simulate(workload(2, rigid_job(1, 0, 2, 5), rigid_job(2, 0, 2, 5)), greedy)
