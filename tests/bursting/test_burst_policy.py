"""The burst decisions as pure functions: when to burst, which plugin, when to tear down."""

from __future__ import annotations

from bursting.plugin import Verdict
from bursting.policy import (
    ActiveBurst,
    BurstNeed,
    QueuedJob,
    burst_name,
    burst_needs,
    first_able,
    idle_marks,
    refusal,
    to_tear_down,
)


def job(
    id: int, state: str = "SCHED", nnodes: int = 4, burstable: bool = True, ranks: tuple[int, ...] = ()
) -> QueuedJob:
    return QueuedJob(id, state, nnodes, nnodes, burstable, ranks)


def test_only_pending_burstable_jobs_too_big_for_the_nodes_present_need_a_burst() -> None:
    assert burst_needs([job(1)], nodes_present=2, bursting_nodes=0, cores_per_node=2) == [BurstNeed(1, 2)]
    assert burst_needs([job(1, burstable=False)], 2, 0, 2) == []  # not marked burstable: waits or is refused
    assert burst_needs([job(1, state="RUN")], 2, 0, 2) == []
    assert burst_needs([job(1, nnodes=2)], 2, 0, 2) == []  # fits the cluster
    assert burst_needs([job(1)], 2, 2, 2) == []  # a burst already on its way brings enough
    assert burst_needs([job(1, nnodes=5)], 2, 2, 2) == [BurstNeed(1, 1)]
    # tasks only: spread over nodes of the cluster's size
    tasks_only = QueuedJob(3, "SCHED", 0, 7, True)
    assert burst_needs([tasks_only], 2, 0, 2) == [BurstNeed(3, 2)]
    # one need at a time, in queue order
    assert burst_needs([job(1, nnodes=3), job(2, nnodes=6)], 2, 0, 2) == [BurstNeed(1, 1)]


def test_default_selection_takes_the_first_able_plugin_and_refusals_name_every_reason() -> None:
    verdicts = {"local": Verdict(False, "too big"), "kubernetes": Verdict(True)}
    assert first_able(BurstNeed(1, 2), verdicts) == "kubernetes"
    assert first_able(BurstNeed(1, 2), {"local": Verdict(False, "too big")}) is None
    assert refusal(verdicts) == "local: too big; kubernetes: declined"
    assert refusal({}) == "no burst plugin is installed"


def test_idle_clock_starts_when_no_active_job_holds_a_burst_rank_and_resets_when_one_does() -> None:
    bursts = [ActiveBurst("c-b1", 2, (2, 3))]
    busy = [job(1, state="RUN", ranks=(0, 1, 2, 3), burstable=False)]
    assert idle_marks(bursts, busy, now=10.0)[0].idle_since is None
    idle = idle_marks(bursts, [job(1, state="INACTIVE", ranks=(2, 3))], now=10.0)
    assert idle[0].idle_since == 10.0
    assert idle_marks(idle, [], now=20.0)[0].idle_since == 10.0  # keeps counting from the first idle moment
    assert idle_marks(idle, busy, now=21.0)[0].idle_since is None


def test_tear_down_after_the_idle_period_unless_a_pending_job_is_about_to_use_the_nodes() -> None:
    bursts = [ActiveBurst("c-b1", 2, (2, 3), idle_since=100.0), ActiveBurst("c-b2", 1, (4,), idle_since=None)]
    assert to_tear_down(bursts, [], now=129.0, idle_period=30.0) == []
    assert to_tear_down(bursts, [], now=130.0, idle_period=30.0) == ["c-b1"]
    fits = [job(7, nnodes=4)]
    assert to_tear_down(bursts, fits, 200.0, 30.0, nodes_present=5, cores_per_node=2) == []
    too_big = [job(8, nnodes=40)]  # cannot run even with the bursts: does not keep them
    assert to_tear_down(bursts, too_big, 200.0, 30.0, nodes_present=5, cores_per_node=2) == ["c-b1"]


def test_burst_names_are_under_their_own_prefix_and_unique() -> None:
    assert burst_name("burst", []) == "burst-b1"
    assert burst_name("burst", ["burst-b1", "burst-b3"]) == "burst-b2"


def test_a_bursts_hosts_come_from_the_one_host_registry() -> None:
    from bursting.plugin import Burst
    from bursting.plugins.burst_spec import burst_minicluster
    from miniclusters.api import load_minicluster
    from miniclusters.api.hosts import registry_for
    from miniclusters.kube_shapes import KubeObject

    lead: KubeObject = {
        "apiVersion": "miniclusters.dev/v1alpha1",
        "kind": "MiniCluster",
        "metadata": {"name": "c"},
        "spec": {"size": 2, "maxSize": 2, "containers": [{"image": "x", "runFlux": True, "command": "app"}]},
    }
    burst = Burst("c-b2", 2, "local", ("c-0", "c-1", "c-b1-0"), "10.0.0.2", 8050)
    mc = load_minicluster(burst_minicluster(lead, burst))
    registry = registry_for(mc)
    # the ranks the lead registered: its hosts (another burst's included), then this burst's pods
    assert registry.hostnames() == ["c-0", "c-1", "c-b1-0", "c-b2-0", "c-b2-1"]
    assert registry.pod_hostnames() == ["c-b2-0", "c-b2-1"] and registry.rank_of("c-b2-1") == 4
    assert mc.spec.flux.bursting.lead_broker is not None and mc.spec.flux.bursting.lead_broker.size == 3
    assert mc.spec.interactive and mc.spec.containers[0].command == ""  # followers only: no command of their own
