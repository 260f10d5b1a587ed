"""Queue-driven autoscaling: the pure plan by hand, then the loop over a simulated cluster and the Kubernetes fake.

The end-to-end cases are the acceptance scenario: a 1-pod MiniCluster (maxSize 4) gets 20 jobs of 1-4 nodes;
it scales up, runs them all, scales back to 1 after the idle period, and loses nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from elasticity.control.timeline import plot_autoscale_timeline
from elasticity.model.node import Node
from elasticity.model.size import size_range
from elasticity.policy.autoscale import AutoscaleMemory, AutoscaleOptions, QueueView, plan_autoscale
from elasticity.sim.autoscale_run import random_jobs, run_autoscale_scenario
from elasticity.sim.cluster import SimulatedCluster
from elasticity.sim.queue import SimulatedQueue

OPTIONS = AutoscaleOptions(idle_seconds=60, cooldown_seconds=20, policy="easy")
SIZES = size_range(0, 4)


def test_grows_to_what_the_scheduler_would_start() -> None:
    # 1 pod. Three 1-node jobs: at maxSize 4 all three start -> 3 nodes.
    assert plan_autoscale(QueueView(pending=(1, 1, 1)), 1, SIZES, OPTIONS, AutoscaleMemory(), 100.0).size == 3
    # 2 and 3 nodes: the 2-node job starts; the 3-node job cannot start beside it, but it runs next -> 3.
    assert plan_autoscale(QueueView(pending=(2, 3)), 1, SIZES, OPTIONS, AutoscaleMemory(), 100.0).size == 3
    # A 1-node job on rank 0 and 2 nodes pending at size 3: 1 + 2 = 3, already there -> nothing to do.
    queue = QueueView(pending=(2,), running=((0,),))
    plan = plan_autoscale(queue, 3, SIZES, OPTIONS, AutoscaleMemory(), 100.0)
    assert (plan.size, plan.wanted) == (None, 3)
    # A job larger than maxSize is never a reason to grow.
    assert plan_autoscale(QueueView(pending=(9,)), 1, SIZES, OPTIONS, AutoscaleMemory(), 100.0).size is None


def test_cooldown_holds_a_scale_up() -> None:
    plan = plan_autoscale(QueueView(pending=(4,)), 1, SIZES, OPTIONS, AutoscaleMemory(last_scale=90.0), 100.0)
    assert plan.size is None and plan.reason == "cooling down" and plan.wanted == 4


def test_shrink_waits_for_the_idle_period_then_drains_then_scales() -> None:
    # 4 pods, one 1-node job on rank 2: needed = max(1 node, highest busy rank 2 + 1) = 3.
    busy = QueueView(running=((2,),))
    first = plan_autoscale(busy, 4, SIZES, OPTIONS, AutoscaleMemory(), 100.0)
    assert (first.size, first.drain, first.memory.surplus_since) == (None, frozenset(), 100.0)
    # After the idle period the rank to remove (3) is drained; once the queue reports it drained (and idle), it goes.
    later = plan_autoscale(busy, 4, SIZES, OPTIONS, first.memory, 160.0)
    assert (later.size, later.drain) == (None, frozenset({3}))
    drained = QueueView(running=((2,),), draining=frozenset({3}))
    done = plan_autoscale(drained, 4, SIZES, OPTIONS, later.memory, 165.0)
    assert (done.size, done.drain) == (3, frozenset({3}))
    # Nothing running: shrink to 1 -- but ranks 1..3 are drained first and rank 2 is still busy: wait.
    busy_rank = QueueView(running=((2,),))
    plan = plan_autoscale(busy_rank, 4, size_range(0, 4), OPTIONS, AutoscaleMemory(surplus_since=0.0), 100.0)
    assert plan.wanted == 3
    empty = QueueView(draining=frozenset({1, 2, 3}))
    plan = plan_autoscale(empty, 4, SIZES, OPTIONS, AutoscaleMemory(surplus_since=0.0), 100.0)
    assert (plan.size, plan.drain) == (1, frozenset({1, 2, 3}))
    # The lead is never drained or removed, and minSize is respected.
    plan = plan_autoscale(empty, 4, size_range(2, 4), OPTIONS, AutoscaleMemory(surplus_since=0.0), 100.0)
    assert (plan.size, plan.drain) == (2, frozenset({2, 3}))


def test_a_pending_job_cancels_the_drain() -> None:
    plan = plan_autoscale(QueueView(pending=(4,), running=((0,),)), 4, SIZES, OPTIONS, AutoscaleMemory(0.0, 0.0), 99.0)
    assert plan.drain == frozenset() and plan.size is None and plan.memory.surplus_since is None


def check_scenario(queue: SimulatedQueue, events: list[dict[str, Any]], tmp_path: Path) -> None:
    sizes = [e["size"] for e in events if e["kind"] == "sample"]
    assert sizes[0] == 1 and max(sizes) == 4 and sizes[-1] == 1  # up to maxSize, back down to 1
    assert queue.finished == 20  # every accepted job ran to completion
    assert all(job.requeues == 0 for job in queue.jobs.values())  # drained before removal: nothing requeued
    scaled = [e for e in events if e["kind"] == "scaled"]
    assert [e["size"] for e in scaled][-1] == 1
    # Before every scale-down, the ranks it removes were drained.
    drains = [e for e in events if e["kind"] == "drain" and e["ranks"]]
    for down in (e for e in scaled if e["size"] < e["previous"]):
        assert any(set(range(down["size"], down["previous"])) <= set(d["ranks"]) for d in drains)
    png = plot_autoscale_timeline(events, tmp_path / "autoscale.png")
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_scenario_on_a_simulated_cluster(tmp_path: Path) -> None:
    clock = [0.0]
    cluster = SimulatedCluster([Node("n1", 64000)], clock=lambda: clock[0])
    cluster.create("auto", size=1, max_size=4)
    jobs = random_jobs(20, 4, seed=7)
    queue, events = run_autoscale_scenario(cluster, cluster, "auto", jobs, OPTIONS, tmp_path / "e.jsonl", clock=clock)
    check_scenario(queue, events, tmp_path)
    assert {nodes for nodes, _ in jobs} == {1, 2, 3, 4}
