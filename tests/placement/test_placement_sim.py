"""The simulated cluster places jobs with the live placement policy and, on the paper's kind of mix, reproduces
its ordering: CM_G_TG has the best overall response time, NONE the worst."""

from __future__ import annotations

from elasticity.sim.placement import SCENARIOS, Scenario, SimJob, paper_mix, simulate_scenario

BY_NAME = {s.name: s for s in SCENARIOS}


def test_paper_ordering_on_four_nodes() -> None:
    jobs = paper_mix(count=20, seed=7, mean_gap=20.0)
    assert {j.kind for j in jobs} == {"cpu", "memory", "network"}
    totals = {s.name: simulate_scenario(jobs, s, nodes=4, cores_per_node=24).response_time for s in SCENARIOS}
    assert min(totals, key=totals.__getitem__) == "CM_G_TG"
    assert max(totals, key=totals.__getitem__) == "NONE"
    assert totals["CM_G_TG"] < totals["CM"] < totals["NONE"]
    assert totals["CM_S_TG"] < totals["CM_S"] and totals["CM_G_TG"] < totals["CM_G"]  # task groups help


def test_shapes_follow_the_policy() -> None:
    jobs = [
        SimJob("net", "network", 16, 50.0, 0.0),
        SimJob("mem", "memory", 16, 50.0, 0.0),
        SimJob("cpu", "cpu", 8, 50.0, 0.0),
    ]
    granular = {o.name: o for o in simulate_scenario(jobs, BY_NAME["CM_G_TG"], 4, 24).jobs}
    assert (granular["net"].workers, granular["net"].nodes) == (1, 1)  # network stays whole
    assert (granular["mem"].workers, granular["mem"].nodes) == (16, 4)  # one worker per rank, a group per node
    assert (granular["cpu"].workers, granular["cpu"].nodes) == (8, 4)
    scaled = {o.name: o for o in simulate_scenario(jobs, BY_NAME["CM_S"], 4, 24).jobs}
    assert (scaled["mem"].workers, scaled["mem"].nodes) == (4, 4)
    user = {o.name: o for o in simulate_scenario(jobs, BY_NAME["NONE"], 4, 24).jobs}
    assert user["mem"].workers == 1


def test_a_job_waits_until_its_gang_fits_and_every_job_finishes() -> None:
    jobs = [SimJob("a", "network", 24, 10.0, 0.0), SimJob("b", "network", 24, 10.0, 1.0)]
    result = simulate_scenario(jobs, Scenario("X", True, "granularity", True), nodes=1, cores_per_node=24)
    a, b = result.jobs
    assert a.start == 0.0 and b.start >= a.end  # one node, whole-node jobs: one at a time
    assert result.makespan == b.end
    assert result.response_time == a.response + b.response
