"""The multiplexing planner against a scripted world: phases, packing, failures and fairness (pure, no I/O)."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import pytest

from elasticity.control.multiplex import MultiplexPlanner
from elasticity.control.multiplex_types import (
    CancelSimulation,
    MultiplexConfig,
    Observation,
    Profile,
    ResizePods,
    SetJobShares,
    SimulationView,
    StartSimulation,
)
from elasticity.policy.fairness import fairness_step
from elasticity.policy.multiplex_requests import SimulationDemand

# 4 ranks on 2 pods; rank 3 (pod 1) is dense, the others sparse: duty 0.05, 0.05, 0.05, 0.95
DUTY = (0.05, 0.05, 0.05, 0.95)
PLACEMENT = {0: (0, 1), 1: (2, 3)}


def config(**overrides: object) -> MultiplexConfig:
    base: dict[str, object] = dict(
        ranks=4, pods=(0, 1), cores_per_node=2, nodes=1, max_simulations=3, equal_per_rank_m=500, headroom=1.0,
        settle_time=1.0, fairness_interval=2.0, start_timeout=10.0,
    )  # fmt: skip
    base.update(overrides)
    return MultiplexConfig(**base)  # type: ignore[arg-type]


@dataclass
class World:
    """Simulations advance at `rate` iterations per second each; pods hold whatever was last accepted."""

    planner: MultiplexPlanner
    allocatable: int = 2000
    now: float = 0.0
    requests: dict[int, int] = field(default_factory=lambda: {0: 1000, 1: 1000})
    state: dict[str, str] = field(default_factory=dict)
    iterations: dict[str, float] = field(default_factory=dict)
    rate: dict[str, float] = field(default_factory=dict)
    answer: str = "done"
    never_start: set[str] = field(default_factory=set)
    profile_rate: float | None = None
    """The iteration rate the profiles report (None: the profiler gave none)."""
    restarts: int = 0
    log: list[object] = field(default_factory=list)

    def tick(self, dt: float = 0.5) -> list[object]:
        self.now += dt
        for sim, st in self.state.items():
            if st == "running":
                self.iterations[sim] += self.rate.get(sim, 10.0) * dt
        views = {}
        for sim, st in self.state.items():
            it = int(self.iterations[sim])
            ready = st == "running" and it >= 50
            profile = Profile(DUTY, PLACEMENT, iteration_rate=self.profile_rate) if ready else None
            views[sim] = SimulationView(sim, st, it if st == "running" else None, profile)  # type: ignore[arg-type]
        obs = Observation(self.now, views, dict(self.requests), self.allocatable, self.restarts)
        actions = self.planner.decide(obs)
        for action in actions:
            self.log.append(action)
            if isinstance(action, StartSimulation):
                self.state[action.sim] = "pending" if action.sim in self.never_start else "running"
                self.iterations[action.sim] = 0.0
            elif isinstance(action, CancelSimulation):
                self.state[action.sim] = "failed"
            elif isinstance(action, ResizePods):
                answers = {}
                for pod, m in action.requests_m.items():
                    # shrinking always fits; growing gets the scripted answer
                    answer = "done" if m <= self.requests.get(pod, 0) else self.answer
                    if answer == "done":
                        self.requests[pod] = m
                    answers[pod] = (answer, "test")
                self.planner.resize_answered(self.now, answers)  # type: ignore[arg-type]
        return [*actions]

    def run(self, seconds: float) -> None:
        end = self.now + seconds
        while self.now < end:
            self.tick()


def until_profiled(world: World, sim: str = "sim1") -> None:
    while sim not in world.planner.sims or not world.planner.sims[sim].profiled:
        world.tick()
        assert world.now < 60, f"{sim} never profiled"


def starts(world: World) -> list[str]:
    return [a.sim for a in world.log if isinstance(a, StartSimulation)]


def test_profile_then_proportional_resize_then_pack_up_to_the_headroom() -> None:
    # the profiles say each simulation keeps 1.1 of the 2 cores busy: the model's knee (efficiency 1 / 1.5 at
    # N = 3, with the demand lowered to the 0.5 this world's unchanging rates allow) would stop at 2; this test
    # is about the headroom, so the knee is set below that
    world = World(MultiplexPlanner(config(efficiency_threshold=0.6)))
    first = world.tick()
    assert isinstance(first[0], StartSimulation) and first[0].profile_iterations == 50
    # equal allocation first: 2 ranks x 500m per pod
    assert world.requests == {0: 1000, 1: 1000}
    until_profiled(world)  # 50 iterations at 10/s: 5 s
    # proportional: pod 0 = 2 x 0.05 x 500 = 50m, pod 1 = 25m + 475m = 500m
    assert world.requests == {0: 50, 1: 500}
    # the profile's rate is sim1's N=1 rate and its resize only shrinks: the next one is packed in that tick
    profile_tick = world.log[-3:]
    assert [type(a) for a in profile_tick] == [ResizePods, SetJobShares, StartSimulation]
    assert starts(world) == ["sim1", "sim2"]
    world.run(40)
    # each simulation adds 550m: 3 fit in 2000m (1650m), --max 3 stops there
    assert starts(world) == ["sim1", "sim2", "sim3"]
    assert world.requests == {0: 150, 1: 1500}
    shares = [a for a in world.log if isinstance(a, SetJobShares)][-1].shares_m
    assert shares[1] == {"sim1": 500, "sim2": 500, "sim3": 500}
    kinds = [e["event"] for e in world.planner.events]
    assert kinds.count("profiled") == 3 and "resize" in kinds


def test_a_profile_taken_alone_is_the_n1_reference_and_packing_need_not_wait_for_it() -> None:
    # settle times long enough that measuring N=1 from progress samples would take 20 s
    # (the knee set below the 1 / 1.5 this world's model predicts for N = 3, as in the test above)
    world = World(MultiplexPlanner(config(settle_time=10.0, efficiency_threshold=0.6)), profile_rate=9.5)
    until_profiled(world)
    assert world.planner.rates_by_n == {1: [9.5]}
    assert [e for e in world.planner.events if e["event"] == "reference-rate"] == [
        {"t": world.now, "event": "reference-rate", "sim": "sim1", "n": 1, "rate": 9.5}
    ]
    world.tick()
    assert starts(world) == ["sim1", "sim2"]
    # sim2 was profiled next to sim1: not a reference; the N=2 rate is measured after the settle times
    until_profiled(world, "sim2")
    assert world.planner.rates_by_n == {1: [9.5]}
    world.run(25)
    assert 2 in world.planner.rates_by_n and world.planner.model is not None
    assert starts(world) == ["sim1", "sim2", "sim3"]


def test_without_a_profile_rate_packing_waits_to_measure_n1() -> None:
    world = World(MultiplexPlanner(config(settle_time=10.0)))
    until_profiled(world)
    world.run(10)
    assert starts(world) == ["sim1"]  # 5.5 s after the resize: still measuring


def test_headroom_limits_packing() -> None:
    world = World(MultiplexPlanner(config(max_simulations=8)), allocatable=1200)
    world.run(60)
    assert starts(world) == ["sim1", "sim2"]  # a third would need 1650m > 1200m
    assert any(e["event"] == "no-headroom" for e in world.planner.events)


def test_refit_beta_from_observed_rates_and_stop_at_the_knee() -> None:
    planner = MultiplexPlanner(config(max_simulations=8))
    world = World(planner, allocatable=10_000)

    def slow_down() -> None:  # each simulation runs at 10 / (1 + 0.5 (N - 1)) it/s: beta = 0.5 / (4/2) = 0.25
        n = sum(1 for s in world.state.values() if s == "running")
        wobble = 1 + 0.03 * math.sin(world.now * 2.3)  # measured rates are never steady
        for sim in world.state:
            world.rate[sim] = 10.0 / (1 + 0.5 * (n - 1)) * wobble

    end = 80.0
    while world.now < end:
        slow_down()
        world.tick()
    assert planner.model is not None
    # the profiles' duty cycles sum to 1.1 cores of the 2: u = 0.55, so N = 2 must stretch by S_2 = 1.1 and
    # beta takes only the rest: (1.5 - 1.1) / (4/2) = 0.2 (the paper's line, blind to the demand, gives 0.25)
    assert planner.model.demand == pytest.approx(0.55)
    assert planner.model.beta == pytest.approx(0.2, rel=0.12)
    assert next(e for e in planner.events if e["event"] == "refit")["demand"] == pytest.approx(0.55)
    # efficiency 1/(1 + 0.5 (N-1)) >= 0.85 only for N = 1: the knee stops packing at 2
    assert starts(world) == ["sim1", "sim2"]
    # said once, though beta is refitted (and the predicted efficiency moves) at every tick after
    assert [e["event"] for e in planner.events].count("knee") == 1
    # and the refits: one per load level fitted, not one per wobble of the rates (each is a Kubernetes Event)
    refits = [e for e in planner.events if e["event"] == "refit"]
    assert [e["n"] for e in refits] == [2] and refits[0]["knee"] == 1, refits


def test_deferred_resize_is_retried_with_backoff_and_nothing_more_is_deployed() -> None:
    world = World(MultiplexPlanner(config()))
    until_profiled(world)
    before = starts(world)
    world.answer = "deferred"
    world.planner.sims["sim1"].demand = SimulationDemand("sim1", {0: 60.0, 1: 600.0})
    world.run(20)
    resizes = [e for e in world.planner.events if e["event"] == "resize-deferred"]
    assert len(resizes) >= 3
    waits = [e["retry_in"] for e in resizes]
    assert waits == sorted(waits) and waits[1] == 2 * waits[0]  # exponential back-off
    assert starts(world) == before
    world.answer = "done"
    world.run(30)
    assert world.requests == {0: 60, 1: 600} or len(starts(world)) > 1


def test_infeasible_resize_caps_the_plan_and_stops_packing() -> None:
    world = World(MultiplexPlanner(config()), requests={0: 20, 1: 20}, answer="infeasible")
    world.run(30)
    planner = world.planner
    assert planner.blocked is not None and "infeasible" in planner.blocked
    assert planner.pod_ceiling_m == {0: 20, 1: 20}
    assert world.requests == {0: 20, 1: 20}
    assert starts(world) == ["sim1"]
    infeasible_resizes = [e for e in planner.events if e["event"] == "resize-answer" and e["answer"] == "infeasible"]
    assert len(infeasible_resizes) == 2  # not retried


def test_simulation_whose_pods_never_start_is_cancelled_and_its_cpu_returned() -> None:
    world = World(MultiplexPlanner(config()), never_start={"sim2"})
    world.run(80)
    cancels = [a for a in world.log if isinstance(a, CancelSimulation)]
    assert [c.sim for c in cancels] == ["sim2"] and "partial deployment" in cancels[0].reason
    # sim2's estimated 550m went back: the plan is sim1 (+ sim3 packed later), never sim2
    assert "sim2" not in {s for shares in world.planner.desired_plan().job_shares_m.values() for s in shares}


def test_early_finish_releases_cpu_and_packs_another() -> None:
    world = World(MultiplexPlanner(config(max_simulations=2, total_simulations=3)))
    world.run(30)
    assert starts(world) == ["sim1", "sim2"]
    world.state["sim1"] = "done"
    world.tick()
    assert world.requests == {0: 50, 1: 500}  # only sim2 left
    world.run(30)
    assert starts(world) == ["sim1", "sim2", "sim3"]


def test_an_idle_cluster_starts_the_next_simulation_at_once() -> None:
    """Nothing running means no rates to let settle: the next simulation goes in the tick that releases sim1's
    CPU (a shrink, which cannot be refused for want of room)."""
    world = World(MultiplexPlanner(config(max_simulations=1, total_simulations=2, settle_time=3.0)))
    world.run(30)
    assert starts(world) == ["sim1"]
    world.state["sim1"] = "done"
    released = world.tick()  # sim1's CPU is released
    assert isinstance(released[0], ResizePods) and isinstance(released[-1], StartSimulation)
    assert starts(world) == ["sim1", "sim2"]


def test_a_simulation_that_ends_before_its_profile_is_read_does_not_stall_the_next() -> None:
    """Short simulations can finish before their 50 profiled iterations are seen: the next one must still
    start (rigid, like the first, and profiled in its turn) instead of the controller waiting for its timeout."""
    world = World(MultiplexPlanner(config(max_simulations=2, total_simulations=3)))
    world.tick()
    world.tick()
    assert starts(world) == ["sim1"] and not world.planner.sims["sim1"].profiled
    world.state["sim1"] = "done"  # it finished after 10 iterations
    for _ in range(4):
        world.tick()
    assert starts(world) == ["sim1", "sim2"]
    assert world.requests == {0: 1000, 1: 1000}  # rigid: the equal allocation, as for sim1
    assert any(e["event"] == "unprofiled" for e in world.planner.events)
    until_profiled(world, "sim2")
    world.run(40)
    assert starts(world) == ["sim1", "sim2", "sim3"]
    assert world.planner.phase != "done" or all(s.state == "done" for s in world.planner.sims.values())


def test_fairness_moves_cpu_to_the_slow_one_in_bounded_steps() -> None:
    world = World(MultiplexPlanner(config(max_simulations=2)))
    world.run(30)
    before = {s: r.demand.total_m for s, r in world.planner.sims.items()}
    world.rate = {"sim1": 10.0, "sim2": 5.0}
    world.run(20)
    steps = [e for e in world.planner.events if e["event"] == "fairness"]
    assert steps and all(e["receiver"] == "sim2" for e in steps)
    first = steps[0]
    assert first["moved_m"] <= 0.25 * before["sim2"] + 1
    times = [e["t"] for e in steps]
    assert all(b - a >= 2.0 for a, b in itertools.pairwise(times))  # at most one per interval
    assert world.planner.sims["sim2"].demand.total_m > before["sim2"]


def test_restarts_are_counted() -> None:
    world = World(MultiplexPlanner(config()))
    world.run(2)
    world.restarts = 1
    world.tick()
    assert world.planner.restarts == 1
    assert any(e["event"] == "pod-restart" for e in world.planner.events)


def test_fairness_step_bounds() -> None:
    step = fairness_step({"a": 1.0, "b": 4.0}, {"a": 400, "b": 400})
    assert step is not None and step.receiver == "a" and step.donor == "b"
    assert step.millicores == 100  # 25% of 400m, although the gap asks for more
    assert fairness_step({"a": 1.0, "b": 1.05}, {"a": 400, "b": 400}) is None
    small = fairness_step({"a": 1.0, "b": 1.2}, {"a": 400, "b": 400})
    assert small is not None and small.millicores == 80  # the gap (20%) asks for less than 25%
    assert fairness_step({"a": 1.0, "b": 4.0}, {"a": 400, "b": 10}) is None  # donor at its floor


def test_simulations_profiled_together_split_the_rigid_allocation_and_start_at_once() -> None:
    world = World(MultiplexPlanner(config(max_simulations=2, profile_together=2)), profile_rate=9.5)
    first = world.tick()
    # both start in the first tick, and the pods' requests stay the rigid 1000m: the two split it
    assert [a.sim for a in first if isinstance(a, StartSimulation)] == ["sim1", "sim2"]
    assert not any(isinstance(a, ResizePods) for a in first)
    shares = [a for a in first if isinstance(a, SetJobShares)][-1].shares_m
    assert shares == {0: {"sim1": 500, "sim2": 500}, 1: {"sim1": 500, "sim2": 500}}
    assert world.requests == {0: 1000, 1: 1000}
    until_profiled(world, "sim2")
    # each profile is read against the full equal allocation (500m a rank), not the half share it ran in:
    # pod 0 = 2 x (2 x 0.05 x 500) = 100m, pod 1 = 2 x (25m + 475m) = 1000m
    assert world.requests == {0: 100, 1: 1000}
    # profiled side by side, neither rate is an N=1 reference
    assert 1 not in world.planner.rates_by_n
    assert "reference-rate" not in [e["event"] for e in world.planner.events]
    world.run(20)
    assert starts(world) == ["sim1", "sim2"]


def test_profile_together_is_bounded_by_max_and_by_total() -> None:
    with pytest.raises(ValueError, match=r"profile together must be between 1 and max \(2\), got 3"):
        config(max_simulations=2, profile_together=3)
    with pytest.raises(ValueError, match="got 0"):
        config(profile_together=0)
    # fewer left to run than profile_together: only those start
    world = World(MultiplexPlanner(config(max_simulations=3, total_simulations=3, profile_together=3)))
    assert [a.sim for a in world.tick() if isinstance(a, StartSimulation)] == ["sim1", "sim2", "sim3"]


@pytest.mark.parametrize(("threshold", "packed"), [(0.85, ["sim1", "sim2"]), (0.6, ["sim1", "sim2", "sim3"])])
def test_without_an_n1_rate_the_knee_is_the_processor_sharing_stretch(threshold: float, packed: list[str]) -> None:
    # profiled together: no simulation ran alone, so beta has no reference. The profiles' demand u = 1.1 / 2
    # cores still bounds the slowdown: three want 1.65 of the cores, efficiency at most 1 / 1.65 = 61% (two:
    # 1 / 1.1 = 91%). Headroom alone would pack the third (3 x 550m fits in 2000m).
    planner = MultiplexPlanner(config(max_simulations=3, profile_together=2, efficiency_threshold=threshold))
    world = World(planner, profile_rate=9.5)
    world.run(30)
    assert starts(world) == packed
    assert 1 not in planner.rates_by_n
    knees = [e["reason"] for e in planner.events if e["event"] == "knee"]
    if len(packed) == 2:
        assert knees and "efficiency 61% for N=3" in knees[0] and "beta unknown" in knees[0], knees
    else:
        assert not knees


def test_a_profile_taken_beside_a_simulation_still_starting_is_no_n1_reference() -> None:
    # started together, sim2's job is still starting (pending) when sim1's profile is read: sim1 did not run
    # alone, so its rate is not the N=1 reference
    planner = MultiplexPlanner(config(max_simulations=2, profile_together=2, start_timeout=30.0))
    world = World(planner, profile_rate=9.5, never_start={"sim2"})
    until_profiled(world, "sim1")
    world.tick()
    assert planner.sims["sim2"].state == "pending"
    # (an N=1 rate may still come from progress samples while sim2 is truly not running; not from the profile)
    assert planner.rates_by_n.get(1) != [9.5]
    assert "reference-rate" not in [e["event"] for e in planner.events]


def test_the_step_a_simulation_ends_files_no_rate_under_the_n_after() -> None:
    # the window before the end ran two simulations: the survivor's rate over it is an N=2 rate, and filing it as
    # N=1 would overwrite the reference and fit beta = 0 (seen in a real run)
    planner = MultiplexPlanner(config(max_simulations=2))
    world = World(planner, profile_rate=9.5)
    until_profiled(world, "sim1")
    world.tick()
    assert starts(world) == ["sim1", "sim2"]
    world.rate.update(sim1=6.0, sim2=6.0)
    until_profiled(world, "sim2")
    world.run(10)
    alone = planner.rates_by_n[1]
    assert alone[0] > 9 and planner.rates_by_n[2] == [pytest.approx(6.0)]
    world.state["sim1"] = "done"
    world.tick()
    assert planner.sims["sim1"].state == "done"
    assert planner.rates_by_n[1] == alone


def test_adopted_simulations_are_watched_not_submitted_and_the_run_goes_on_to_its_total() -> None:
    """A planner taking over an earlier controller's run (sim1 running and profiled, sim2 running): nothing is
    submitted for them, their profiles are read again, and only sim3 starts, to reach total 3."""
    planner = MultiplexPlanner(config(total_simulations=3, max_simulations=3))
    world = World(planner)
    world.state.update(sim1="running", sim2="running")
    world.iterations.update(sim1=120.0, sim2=60.0)
    planner.adopt({"sim1": 1, "sim2": 2}, now=0.0)
    assert planner.sims["sim2"].retries == 1
    assert [e["sims"] for e in planner.events if e["event"] == "adopted"] == [["sim1", "sim2"]]
    started: list[str] = []
    for _ in range(400):
        started += [a.sim for a in world.tick() if isinstance(a, StartSimulation)]
        for sim, done in list(world.iterations.items()):
            if world.state[sim] == "running" and done >= 300:
                world.state[sim] = "done"  # each ends after 300 iterations
        if planner.phase == "done":
            break
    assert started == ["sim3"], "only what the run still lacked was started"
    assert planner.phase == "done" and [r.state for r in planner.sims.values()] == ["done", "done", "done"]
    assert all(rec.profiled for rec in planner.sims.values())
    assert not any(e["event"] == "controller-start" for e in planner.events)
