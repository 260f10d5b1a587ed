"""A pool of MiniClusters as malleable jobs, resized by the very policy functions the simulator replays traces
with: a high-priority cluster arriving shrinks a low-priority one (after draining its ranks: no job lost)."""

from __future__ import annotations

from elasticity.control.pool import Member, Pool
from elasticity.model.node import Node
from elasticity.model.speedup import JobSize
from elasticity.policy.scheduling import policy_named
from elasticity.sim.cluster import SimulatedCluster
from elasticity.sim.queue import SimulatedQueue


class Launch:
    def __init__(self, cluster: SimulatedCluster, sizes: dict[str, int]) -> None:
        self.cluster, self.sizes = cluster, sizes

    def launch(self, name: str, size: int) -> None:
        self.cluster.create(name, size=size, max_size=self.sizes[name], min_size=0)


def make(policy: str) -> tuple[SimulatedCluster, Pool, list[float]]:
    clock = [0.0]
    cluster = SimulatedCluster([Node("n1", 64000)], clock=lambda: clock[0])
    launcher = Launch(cluster, {"a": 8, "b": 4})
    pool = Pool(8, policy_named(policy, rescale_gap=0), cluster, cluster, launcher, clock=lambda: clock[0])
    return cluster, pool, clock


def test_elastic_pool_shrinks_the_low_priority_cluster_after_draining_it() -> None:
    cluster, pool, clock = make("elastic")
    pool.add(Member("a", JobSize(1, 1, 8), priority=1, submit=0))
    assert pool.step().acted == ["start a at 8"]
    queue = SimulatedQueue(cluster, "a")
    queue.submit(1, 8, 100.0)  # an 8-node job on every rank of a
    queue.advance(0.0)
    pool.queues = {"a": queue}
    clock[0] = 10.0
    pool.add(Member("b", JobSize(2, 2, 4), priority=5, submit=10))
    # Elastic: b (priority 5) needs 2; a (priority 1) gives them -- but ranks 6-7 run the job: drain, wait.
    assert pool.step().acted == []
    assert cluster.observe("a").size == 8 and queue.drained == frozenset({6, 7}) and "b" not in cluster.clusters
    clock[0] = 100.0
    queue.advance(100.0)  # the job finished (never killed)
    assert queue.finished == 1
    assert pool.step().acted == ["scale a 8 -> 6", "start b at 2"]
    assert queue.drained == frozenset()
    # b finishes: its 2 pods go back to a.
    pool.remove("b")
    clock[0] = 200.0
    assert pool.step().acted == ["scale a 6 -> 8"]


def test_min_strategy_pool() -> None:
    cluster, pool, clock = make("min")
    pool.add(Member("a", JobSize(1, 4, 8), submit=0))
    # EASY starts a at its preferred 4 pods; step 3 expands it with the 4 idle ones.
    assert pool.step().acted == ["start a at 8"]
    clock[0] = 5.0
    pool.add(Member("b", JobSize(2, 4, 4), submit=5))
    # b cannot start at 4 (0 idle); Min shrinks a (8 - 1 = 7 above its minimum) by b's minimum, 2.
    assert pool.step().acted == ["scale a 8 -> 6", "start b at 2"]
    assert cluster.observe("b").size == 2
