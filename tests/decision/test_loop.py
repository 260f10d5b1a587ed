"""observe -> plan -> act over the simulated cluster, with a virtual clock and the JSON-lines event log."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from elasticity.control.events import EventLog, read_events
from elasticity.control.loop import Decision, Loop
from elasticity.control.ports import Actuator, ClusterView, Observer, Rejected, ResizeOutcome
from elasticity.model.node import Node
from elasticity.sim.cluster import SimulatedCluster


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def grow_until(view: ClusterView, target: int, now: float) -> Decision:
    """A toy plan: one pod more per step up to `target` (the options), then nothing."""
    if view.size < target:
        return Decision(size=view.sizes.clamp(view.size + 1), reason=f"want {target} at t={now:g}")
    return Decision()


def test_sim_implements_the_ports() -> None:
    sim = SimulatedCluster([Node("n0", 4000)])
    assert isinstance(sim, Observer) and isinstance(sim, Actuator)


def test_loop_scales_step_by_step_and_logs_with_the_injected_clock(tmp_path: Path) -> None:
    clock = Clock()
    sim = SimulatedCluster([Node("n0", 4000)], clock=clock)
    sim.create("demo", size=1, max_size=3, cpu_per_pod=500)
    log = EventLog(tmp_path / "events.jsonl", loop="toy", clock=clock)
    loop = Loop("demo", sim, sim, grow_until, 5, clock=clock, log=log)
    changed = loop.run(interval=10.0, sleep=clock.sleep, max_steps=6)
    log.close()
    assert [r.acted.scaled.size for r in changed if r.acted.scaled] == [2, 3]  # clamped at maxSize=3, then nothing
    assert sim.observe("demo").size == 3 and sim.observe("demo").observed_at == 160.0
    events = list(read_events(tmp_path / "events.jsonl"))
    # At maxSize the plan's clamped answer equals the size: a no-op, neither acted on nor logged.
    assert [e["kind"] for e in events] == ["decision", "scaled", "decision", "scaled"]
    assert events[0]["time"] == 100.0 and events[2]["time"] == 110.0 and events[0]["cluster"] == "demo"
    assert events[2]["reason"] == "want 5 at t=110" and events[3] == {**events[3], "previous": 2, "size": 3}


def test_resize_many_is_one_call_and_answers_per_pod() -> None:
    sim = SimulatedCluster([Node("n0", 2000)])
    sim.create("demo", size=3, max_size=3, cpu_per_pod=500)
    answers = sim.resize_many("demo", {0: 64000, 1: 1200, 2: 250})
    assert sim.calls == [("resize_many", "demo")]
    assert answers[0].outcome == ResizeOutcome.INFEASIBLE and "capacity: 2" in answers[0].reason
    assert answers[1].outcome == ResizeOutcome.DEFERRED and "used: 1" in answers[1].reason
    assert answers[2].outcome == ResizeOutcome.DONE and answers[2].ok
    view = sim.observe("demo")
    assert [p.cpu_actual for p in view.pods] == [500, 500, 250]  # refused pods keep their CPU
    assert view.pod(0).resize == ResizeOutcome.INFEASIBLE  # type: ignore[union-attr]
    with pytest.raises(Rejected, match="no pod with index 7"):
        sim.resize_many("demo", {7: 100})


def test_scale_outside_the_range_is_rejected_and_changes_nothing() -> None:
    sim = SimulatedCluster([Node("n0", 8000)])
    sim.create("demo", size=2, max_size=4)
    with pytest.raises(Rejected, match=r"above spec\.maxSize=4"):
        sim.scale("demo", 5)
    with pytest.raises(Rejected, match="lead broker"):
        sim.scale("demo", 0)
    assert sim.observe("demo").size == 2
    sim.scale("demo", 1)
    sim.scale("demo", 4)  # the ceiling is what was created, not the size it was scaled from
    assert [p.index for p in sim.observe("demo").pods] == [0, 1, 2, 3]


def test_a_refused_action_is_logged_not_raised() -> None:
    clock = Clock()
    sim = SimulatedCluster([Node("n0", 8000)], clock=clock)
    sim.create("demo", size=1, max_size=2)
    stream = io.StringIO()
    loop = Loop("demo", sim, sim, lambda v, o, now: Decision(size=9), None, clock=clock)
    loop.log = EventLog(stream, loop="bad", clock=clock)
    result = loop.step()
    assert "above spec.maxSize=2" in result.acted.error
    kinds = [json.loads(line)["kind"] for line in stream.getvalue().splitlines()]
    assert kinds == ["decision", "error"]
