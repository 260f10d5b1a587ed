"""The live malleable loop (elasticity/control/malleable.py) on a port whose jobs run exactly at the speedup
model's rate: it decides what the simulator decides (one decision path, `plan_pass`), and it handles a job that
ignores its resize and one that fails while resizing as the contract says."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import pytest

from elasticity.control.malleable import LiveJob, MalleableLoop, Observation, Phase
from elasticity.model.speedup import Amdahl, JobSize
from elasticity.policy.scheduling.registry import policy_named
from elasticity.sim.engine import simulate
from elasticity.sim.live import live_jobs, live_result
from elasticity.sim.metrics import summarize
from elasticity.sim.workload import SimJob, Workload


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@dataclass
class ModelPort:
    """Jobs progressing at 1 / runtime_on(nodes) per second; a signalled job checkpoints at its next look."""

    clock: Clock
    ignore: set[str] = field(default_factory=set)
    fail_on_resize: set[str] = field(default_factory=set)
    nodes: dict[str, int] = field(default_factory=dict)
    done: dict[str, float] = field(default_factory=dict)
    since: dict[str, float] = field(default_factory=dict)
    asked: set[str] = field(default_factory=set)
    submits: list[tuple[str, int]] = field(default_factory=list)

    def submit(self, job: LiveJob, nodes: int) -> None:
        self._advance(job)
        self.nodes[job.name], self.since[job.name] = nodes, self.clock.now
        self.asked.discard(job.name)
        self.submits.append((job.name, nodes))

    def resize(self, job: LiveJob) -> bool:
        self._advance(job)
        self.asked.add(job.name)
        return True

    def _advance(self, job: LiveJob) -> None:
        if job.name in self.nodes and (job.name not in self.asked or job.name in self.ignore):
            elapsed = self.clock.now - self.since[job.name]
            self.done[job.name] = self.done.get(job.name, 0.0) + elapsed / job.runtime_on(self.nodes[job.name])
        self.since[job.name] = self.clock.now

    def observe(self, job: LiveJob) -> Observation:
        self._advance(job)
        progress = min(1.0, self.done.get(job.name, 0.0))
        if job.name in self.asked and job.name in self.fail_on_resize:
            return Observation(Phase.FAILED, progress, "rank 1 was killed (SIGKILL)")
        if job.name in self.asked and job.name not in self.ignore:
            return Observation(Phase.CHECKPOINTED, progress)
        if progress >= 1.0 - 1e-6:
            return Observation(Phase.DONE, 1.0)
        return Observation(Phase.RUNNING, progress)


def _workload() -> Workload:
    model = Amdahl(0.05)
    jobs = (
        SimJob(1, 0.0, 400.0, 400.0, JobSize(2, 4, 8), 1, model),
        SimJob(2, 20.0, 300.0, 300.0, JobSize(2, 4, 8), 1, model),
        SimJob(3, 50.0, 200.0, 200.0, JobSize(4, 4, 4), 1, model),
        SimJob(4, 90.0, 250.0, 250.0, JobSize(1, 2, 6), 1, model),
        SimJob(5, 400.0, 130.0, 130.0, JobSize(2, 2, 8), 1, model),  # not ending with j04: a tick apart
    )
    return Workload("five", 8, jobs)


def _run(policy: str, port_options: dict[str, set[str]] | None = None, timeout: float = 60.0) -> tuple:
    clock = Clock()
    options = port_options or {}
    port = ModelPort(clock, ignore=options.get("ignore", set()), fail_on_resize=options.get("fail_on_resize", set()))
    workload = _workload()
    loop = MalleableLoop(live_jobs(workload), 8, policy_named(policy), port, policy, timeout, clock=clock)
    while not loop.finished and clock.now < 5000:
        loop.step()
        clock.now += 0.05
    return loop, port, live_result(loop, workload)


@pytest.mark.parametrize("policy", ["easy", "min", "keeppref"])
def test_the_loop_decides_what_the_simulator_decides(policy: str) -> None:
    simulated = simulate(_workload(), policy_named(policy), policy_name=policy)
    _, _, live = _run(policy)
    for sim, got in zip(simulated.records, live.records, strict=True):
        assert (got.job, got.nodes, got.expands, got.shrinks) == (sim.job, sim.nodes, sim.expands, sim.shrinks)
        assert got.start == pytest.approx(sim.start, abs=0.2) and got.end == pytest.approx(sim.end, abs=1.0)
    assert summarize(live)["mean_turnaround"] == pytest.approx(summarize(simulated)["mean_turnaround"], rel=0.01)
    if policy != "easy":
        assert sum(r.expands + r.shrinks for r in live.records) > 0, "the malleable policy resized nothing"


def test_a_job_that_ignores_its_resize_keeps_its_size_and_nothing_is_lost() -> None:
    loop, port, live = _run("min", {"ignore": {"j01"}}, timeout=5.0)
    assert loop.finished and all(r.end > r.start for r in live.records)
    assert all(not math.isnan(r.end) for r in live.records)
    first = next(r for r in live.records if r.job == 1)
    assert first.expands == first.shrinks == 0
    assert [s for s in port.submits if s[0] == "j01"] == [("j01", 8)], "never restarted"


def test_a_job_whose_rank_dies_while_resizing_fails_naming_the_resize() -> None:
    loop, _, _ = _run("min", {"fail_on_resize": {"j01"}})
    state = loop.states[0]
    assert state.phase == "failed" and re.match(r"failed while resizing from \d+ to \d+ nodes: ", state.reason)
    assert "rank 1 was killed" in state.reason
    assert loop.finished and [s.phase for s in loop.states.values()].count("done") == 4
