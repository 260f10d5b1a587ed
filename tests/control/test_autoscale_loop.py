"""The autoscaling loop's drains belong to the lead, not to the process: a loop killed mid-drain and started
again (or replaced) finds the ranks it drained by their reason and undrains them; an operator's drain of the
same cluster is never touched (pure: a simulated cluster and queue, a virtual clock)."""

from __future__ import annotations

from elasticity.control.autoscale import Autoscaler
from elasticity.model.node import Node
from elasticity.policy.autoscale import AutoscaleOptions
from elasticity.sim.cluster import SimulatedCluster
from elasticity.sim.queue import SimulatedQueue

OPTIONS = AutoscaleOptions(idle_seconds=10, cooldown_seconds=600, policy="easy")


class Log:
    """An EventLog stand-in keeping the records."""

    def __init__(self) -> None:
        self.records: list[dict[str, object]] = []

    def write(self, kind: str, cluster: str = "", **fields: object) -> dict[str, object]:
        record = {"kind": kind, "cluster": cluster, **fields}
        self.records.append(record)
        return record


def world() -> tuple[SimulatedCluster, SimulatedQueue, list[float]]:
    clock = [0.0]
    cluster = SimulatedCluster([Node("n1", 64000)], clock=lambda: clock[0])
    cluster.create("auto", size=1, max_size=3)
    return cluster, SimulatedQueue(cluster, "auto"), clock


def loop(cluster: SimulatedCluster, queue: SimulatedQueue, clock: list[float], log: Log) -> Autoscaler:
    return Autoscaler("auto", cluster, cluster, queue, OPTIONS, clock=lambda: clock[0], log=log)  # type: ignore[arg-type]


def run(scaler: Autoscaler, queue: SimulatedQueue, clock: list[float], seconds: float) -> None:
    end = clock[0] + seconds
    while clock[0] < end:
        queue.advance(clock[0])
        scaler.step()
        clock[0] += 1.0


def test_a_loop_started_after_one_was_killed_mid_drain_undrains_what_it_drained_and_nothing_else() -> None:
    cluster, queue, clock = world()
    first = loop(cluster, queue, clock, Log())
    queue.submit(1, nodes=3, duration=2.0)
    run(first, queue, clock, 30)  # grew to 3 for the job, which ended; idle: ranks 1-2 drained, cooling down
    assert cluster.observe("auto").size == 3 and queue.drained == {1, 2}, "mid-drain, as the kill finds it"
    # the loop is killed here (nothing undrains), and an operator drains rank 2 for maintenance meanwhile
    queue.drained, queue.foreign = frozenset({1}), frozenset({2})
    queue.submit(2, nodes=2, duration=100.0)
    queue.advance(clock[0])
    assert queue.jobs[2].start is None, "pends behind the drained ranks while no loop runs"

    log = Log()
    second = loop(cluster, queue, clock, log)
    run(second, queue, clock, 1)
    assert queue.drained == frozenset() and queue.foreign == {2}, "its own drain went, the operator's stayed"
    assert log.records[1] == {
        "kind": "undrain", "cluster": "auto", "ranks": [1], "reason": "drained by an earlier autoscaler of this cluster"
    }  # fmt: skip
    queue.advance(clock[0])
    assert queue.jobs[2].start is not None and queue.jobs[2].ranks == {0, 1}


def test_a_loop_never_drains_over_an_operators_drain_nor_undrains_it_when_it_stops_draining() -> None:
    cluster, queue, clock = world()
    scaler = loop(cluster, queue, clock, Log())
    queue.submit(1, nodes=3, duration=2.0)
    run(scaler, queue, clock, 2)
    assert queue.jobs[1].start is not None
    queue.foreign = frozenset({2})  # an operator's drain, set once the job has its ranks
    run(scaler, queue, clock, 30)
    assert queue.drained == {1} and queue.foreign == {2} and scaler.draining == {1}
    queue.submit(2, nodes=3, duration=5.0)  # the queue wants every rank again: the loop lets go of its own
    run(scaler, queue, clock, 2)
    assert queue.drained == frozenset() and queue.foreign == {2}


def test_each_step_hands_back_what_it_saw_planned_and_did() -> None:
    """The operator reads the StepResult: the scale the world answered, then the ranks the loop drained."""
    cluster, queue, clock = world()
    scaler = loop(cluster, queue, clock, Log())
    queue.submit(1, nodes=3, duration=2.0)
    queue.advance(clock[0])
    grew = scaler.step()
    assert grew.now == 0.0 and grew.seen.view.size == 1 and grew.plan.size == 3
    assert grew.acted.scaled is not None and (grew.acted.scaled.previous, grew.acted.scaled.size) == (1, 3)
    assert not grew.acted.error and grew.acted.drained is None
    drained = None
    while drained is None and clock[0] < 60:
        clock[0] += 1.0
        queue.advance(clock[0])
        drained = scaler.step().acted.drained
    assert drained == frozenset({1, 2}) and queue.drained == {1, 2}, "idle after the job: ranks 1-2 drained"
