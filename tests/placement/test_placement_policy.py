"""The placement policy reproduces Liu and Guitart's decisions (16 ranks, 4 nodes) and keeps its invariants."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from common import idset
from elasticity.policy.placement import (
    CommunicationProfile,
    NodeRoom,
    NotEnoughCores,
    Unschedulable,
    WorkerRequest,
    assign_cores,
    exclusive_cpus,
    form_task_groups,
    mpi_aware_layout,
    mpi_fraction_from_duty,
    place_spread,
    place_task_groups,
    profile_class,
    score_node,
    select_granularity,
)

GiB = 1 << 30


# ---------------------------------------------------------------- Algorithm 1 on the paper's example
@pytest.mark.parametrize(
    ("profile", "policy", "expected"),
    [
        ("cpu", "scale", (4, 4, 4)),
        ("memory", "scale", (4, 4, 4)),
        ("cpu", "granularity", (16, 4, 4)),
        ("memory", "granularity", (16, 4, 4)),
        ("network", "scale", (1, 1, 1)),
        ("network", "granularity", (1, 1, 1)),
    ],
)
def test_granularity_of_sixteen_ranks_on_four_nodes(profile: str, policy: str, expected: tuple[int, int, int]) -> None:
    shape = select_granularity(16, profile, policy, 4)  # type: ignore[arg-type]
    assert (shape.workers, shape.nodes, shape.groups) == expected
    assert shape.ranks == 16


def test_no_policy_keeps_the_users_workers_and_does_not_group() -> None:
    shape = select_granularity(16, "cpu", "none", 4, workers_given=2)
    assert (shape.workers, shape.nodes, shape.groups) == (2, 1, 1)


def test_fewer_ranks_than_nodes_uses_only_as_many_nodes_as_ranks() -> None:
    assert select_granularity(3, "cpu", "scale", 8) == select_granularity(3, "cpu", "granularity", 8)
    assert select_granularity(3, "cpu", "scale", 8).nodes == 3


def test_network_job_too_big_for_one_node_gets_one_worker_per_node() -> None:
    shape = select_granularity(16, "network", "granularity", 4, cores_per_node=6)
    assert (shape.workers, shape.nodes, shape.groups) == (3, 3, 3)


@given(
    ranks=st.integers(1, 200),
    nodes=st.integers(1, 64),
    profile=st.sampled_from(["cpu", "memory", "network"]),
    policy=st.sampled_from(["scale", "granularity"]),
)
def test_granularity_invariants(ranks: int, nodes: int, profile: str, policy: str) -> None:
    shape = select_granularity(ranks, profile, policy, nodes)  # type: ignore[arg-type]
    assert 1 <= shape.nodes <= min(nodes, ranks)
    assert shape.nodes <= shape.workers <= ranks
    assert shape.groups == shape.nodes
    if profile == "network":
        assert shape.workers == 1
    elif policy == "granularity":
        assert shape.workers == ranks


# ---------------------------------------------------------------- profile class
def test_profile_overrides_the_spec_only_on_communication() -> None:
    chatty = CommunicationProfile(mpi_fraction=0.6)
    quiet = CommunicationProfile(mpi_fraction=0.05)
    assert profile_class("cpu", chatty) == "network"
    assert profile_class("network", quiet) == "cpu"
    assert profile_class("memory", quiet) == "memory"
    assert profile_class("memory", None) == "memory"
    assert profile_class("cpu", CommunicationProfile(0.05, bytes_per_second=2e9)) == "network"
    # waiting in MPI without moving data is imbalance, not network; moving data while waiting is
    assert profile_class("cpu", CommunicationProfile(0.45, bytes_per_second=0.0)) == "cpu"
    assert profile_class("cpu", CommunicationProfile(0.45, bytes_per_second=20e6)) == "network"
    assert mpi_fraction_from_duty([0.4, 0.6]) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="mpi_fraction"):
        CommunicationProfile(mpi_fraction=1.5)


# ---------------------------------------------------------------- Algorithm 2
def test_round_robin_layout_of_sixteen_ranks_in_six_workers() -> None:
    layout = mpi_aware_layout(16, 6, job_cpu_milli=16000, job_memory_bytes=16 * GiB)
    assert [w.ranks for w in layout.workers][:2] == [(0, 6, 12), (1, 7, 13)]
    assert [w.slots for w in layout.workers] == [3, 3, 3, 3, 2, 2]
    assert [w.cpu_milli for w in layout.workers] == [3000, 3000, 3000, 3000, 2000, 2000]
    assert layout.hostfile([f"h{i}" for i in range(6)]).splitlines()[0] == "h0 slots=3"
    assert layout.worker_of(13) == 1


@given(ranks=st.integers(1, 300), data=st.data(), cpu=st.integers(0, 10**6), memory=st.integers(0, 10**12))
def test_every_rank_placed_once_and_requests_sum(ranks: int, data: st.DataObject, cpu: int, memory: int) -> None:
    workers = data.draw(st.integers(1, ranks))
    layout = mpi_aware_layout(ranks, workers, cpu, memory)
    placed = sorted(r for w in layout.workers for r in w.ranks)
    assert placed == list(range(ranks))
    assert sum(w.cpu_milli for w in layout.workers) == cpu
    assert sum(w.memory_bytes for w in layout.workers) == memory
    slots = [w.slots for w in layout.workers]
    assert max(slots) - min(slots) <= 1
    for w in layout.workers:  # each share is within one unit of the exact proportion
        assert abs(w.cpu_milli - cpu * w.slots / ranks) < 1 + 1e-9
        assert exclusive_cpus(w) * 1000 >= w.cpu_milli


# ---------------------------------------------------------------- Algorithms 3 and 4
def test_sixteen_single_rank_workers_form_four_groups_one_per_node() -> None:
    layout = mpi_aware_layout(16, 16, 16000, 16 * GiB)
    requests = [WorkerRequest(w.index, w.cpu_milli, w.memory_bytes) for w in layout.workers]
    groups = form_task_groups(requests, 4)
    assert [len(g) for g in groups] == [4, 4, 4, 4]
    nodes = [NodeRoom(f"node{i}", 8000, 32 * GiB) for i in range(4)]
    bound = place_task_groups(requests, groups, nodes)
    for members in groups:  # affinity: a group on one node
        assert len({bound[w] for w in members}) == 1
    assert len({bound[g[0]] for g in groups}) == 4  # anti-affinity: groups on distinct nodes
    # on a partly busy cluster the default scheduler alone scatters a group's workers; task groups do not
    busy = [NodeRoom("node0", 8000, 32 * GiB), *(NodeRoom(f"node{i}", 6000, 32 * GiB) for i in range(1, 4))]
    spread = place_spread(requests, busy)
    assert any(len({spread[w] for w in members}) > 1 for members in groups)
    grouped = place_task_groups(requests, groups, busy)
    assert all(len({grouped[w] for w in members}) == 1 for members in groups)


def test_node_score_counts_own_group_and_penalises_other_groups() -> None:
    group_of = {0: 0, 1: 0, 2: 1, 3: 2}
    bound = {0: "a", 2: "a", 3: "a", 1: "b"}
    assert score_node("a", 0, 2, bound, group_of) == 2 + 1 - 2
    assert score_node("b", 0, 2, bound, group_of) == 2 + 1
    assert score_node("c", 0, 2, bound, group_of) == 2


def test_a_group_that_does_not_fit_one_node_overflows_and_an_impossible_worker_is_unschedulable() -> None:
    requests = [WorkerRequest(i, 1000, 0) for i in range(4)]
    bound = place_task_groups(requests, ((0, 1, 2, 3),), [NodeRoom("a", 3000, 0), NodeRoom("b", 3000, 0)])
    assert sorted(bound.values()).count("a") == 3
    with pytest.raises(Unschedulable, match="worker 0"):
        place_task_groups([WorkerRequest(0, 5000, 0)], ((0,),), [NodeRoom("a", 3000, 0)])


@given(
    ranks=st.integers(1, 64),
    data=st.data(),
)
def test_groups_are_even_and_every_worker_bound_within_capacity(ranks: int, data: st.DataObject) -> None:
    workers = data.draw(st.integers(1, ranks))
    n_groups = data.draw(st.integers(1, workers))
    layout = mpi_aware_layout(ranks, workers, ranks * 1000, ranks * GiB)
    requests = [WorkerRequest(w.index, w.cpu_milli, w.memory_bytes) for w in layout.workers]
    groups = form_task_groups(requests, n_groups)
    sizes = [len(g) for g in groups]
    assert max(sizes) - min(sizes) <= 1
    assert sorted(w for g in groups for w in g) == list(range(workers))
    nodes = [NodeRoom(f"n{i}", 64000, 64 * GiB) for i in range(n_groups)]
    bound = place_task_groups(requests, groups, nodes)
    assert set(bound) == set(range(workers))
    for node in nodes:
        on_node = [r for r in requests if bound[r.index] == node.name]
        assert sum(r.cpu_milli for r in on_node) <= node.free_cpu_milli
    # with room everywhere, every group sits on its own node
    assert len({frozenset(bound[w] for w in g) for g in groups}) == n_groups
    assert all(len({bound[w] for w in g}) == 1 for g in groups)


# ---------------------------------------------------------------- exclusive cores
def test_exclusive_cores_are_disjoint_and_refused_rather_than_shared() -> None:
    assert assign_cores(range(4), {1}, [1, 2]) == ((0,), (2, 3))
    with pytest.raises(NotEnoughCores, match="3 exclusive core"):
        assign_cores(range(2), set(), [1, 2])
    assert idset.encode([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8"
    assert tuple(idset.decode("0-2,5,7-8\n")) == (0, 1, 2, 5, 7, 8)


@given(st.sets(st.integers(0, 127)))
def test_cpu_list_round_trips(cpus: set[int]) -> None:
    assert tuple(idset.decode(idset.encode(cpus))) == tuple(sorted(cpus))
