"""What podman status says after faults, decided without podman (issue 41): a container stopped by hand is down
for good, not crash-looping; a pod whose broker has not joined is not ready; RESTARTS never goes down."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from miniclusters.backends.base import ClusterStatus
from miniclusters.backends.podman.observe import InspectedContainer, PodmanPod, phase_of, pod_status
from miniclusters.backends.podman.restarts import NEVER_STARTED, RestartLedger, Seen, advance
from miniclusters.backends.states import cluster_state

KILLED: InspectedContainer = {
    "Id": "c1",
    "State": {"Status": "exited", "ExitCode": 137, "StartedAt": "2026-01-01T00:00:00Z"},
    "HostConfig": {"RestartPolicy": {"Name": "on-failure"}},
    "RestartCount": 0,
}
RUNNING: InspectedContainer = {
    "Id": "c0",
    "State": {"Status": "running", "StartedAt": "2026-01-01T00:00:00Z"},
    "RestartCount": 0,
}


def test_a_container_stopped_by_hand_is_a_failed_pod_not_a_crash_loop() -> None:
    """`podman kill` of a follower: podman will not restart it (it was "CrashLoopBackOff, 0 restarts" forever)."""
    assert phase_of(PodmanPod(1, "pm-1", "Degraded", KILLED, stopped_by_user=True)) == ("Failed", 137, "Error")
    assert phase_of(PodmanPod(1, "pm-1", "Degraded", KILLED)) == ("Running", None, "CrashLoopBackOff")


def test_four_pods_one_killed_by_hand_are_three_running_and_degraded() -> None:
    pods = [PodmanPod(i, f"pm-{i}", "Running", {**RUNNING, "Id": f"c{i}"}) for i in (0, 2, 3)]
    pods.insert(1, PodmanPod(1, "pm-1", "Degraded", KILLED, stopped_by_user=True))
    statuses = tuple(pod_status(p, 250, ranks_up=(0, 2, 3)) for p in pods)
    status = ClusterStatus("pm", "default", 4, 4, 1, statuses, ranks_up=(0, 2, 3), ranks_down=(1,))
    assert (status.running_pods, status.ready_pods, cluster_state(status)) == (3, 3, "Degraded")


def test_a_running_pod_whose_rank_is_down_is_not_ready() -> None:
    """A lead started again by hand: 4 pods run, ranks 1-3 have not rejoined (it said "Running, 4 ready")."""
    pods = [PodmanPod(i, f"pm-{i}", "Running", {**RUNNING, "Id": f"c{i}"}) for i in range(4)]
    statuses = tuple(pod_status(p, 250, ranks_up=(0,)) for p in pods)
    status = ClusterStatus("pm", "default", 4, 4, 1, statuses, ranks_up=(0,), ranks_down=(1, 2, 3))
    assert [p.ready for p in statuses] == [True, False, False, False]
    assert status.running_pods == 4 and status.ready_pods == 1 and cluster_state(status) != "Running"
    everyone = tuple(pod_status(p, 250, ranks_up=(0, 1, 2, 3)) for p in pods)
    assert cluster_state(ClusterStatus("pm", "default", 4, 4, 1, everyone, ranks_up=(0, 1, 2, 3))) == "Running"


def test_a_start_by_hand_is_a_restart_podman_forgets() -> None:
    """Killed (podman restarts it: 1), killed with `podman kill` and started again (podman says 0): 2."""
    seen = advance(None, "c0", "t0", 0)
    seen = advance(seen, "c0", "t1", 1)
    assert seen.restarts == 1
    seen = advance(seen, "c0", "t2", 0)
    assert seen.restarts == 2
    seen = advance(seen, "c0", "t3", 0)  # started by hand again, podman's count still 0
    assert seen.restarts == 3
    seen = advance(seen, "c0", "t3", 0)  # nothing happened
    assert seen.restarts == 3
    assert advance(seen, "c9", "t4", 0).restarts == 0  # a new container: a new pod (scaled down and up)


def test_a_first_start_is_not_a_restart() -> None:
    seen = advance(None, "c0", NEVER_STARTED, 0)  # created by kube play, not started yet
    assert advance(seen, "c0", "t0", 0).restarts == 0


LOOKS = st.lists(
    st.tuples(st.sampled_from(["c0", "c0", "c0", "c1"]), st.sampled_from(["t0", "t1", "t2"]), st.integers(0, 5))
)


@given(LOOKS)
def test_restarts_never_go_down_while_the_container_is_the_same(looks: list[tuple[str, str, int]]) -> None:
    seen: Seen | None = None
    for container, started, count in looks:
        before = seen.restarts if seen is not None and seen.container == container else 0
        seen = advance(seen, container, started, count)
        assert seen.restarts >= before, (looks, seen)


def test_the_ledger_keeps_counts_across_looks_and_leaves_the_record_alone(tmp_path: Path) -> None:
    (tmp_path / "podman.json").write_text("{}")
    ledger = RestartLedger(tmp_path)
    assert ledger.update({0: ("c0", "t0", 1), 1: ("c1", "t0", 0)}) == {0: 1, 1: 0}
    assert ledger.update({0: ("c0", "t1", 0)}) == {0: 2}  # pod 1 not seen this time (initialising): kept
    assert RestartLedger(tmp_path).update({0: ("c0", "t1", 0), 1: ("c1", "t0", 0)}) == {0: 2, 1: 0}
    assert (tmp_path / "podman.json").read_text() == "{}"
    assert RestartLedger(tmp_path / "gone").update({0: ("c0", "t0", 3)}) == {0: 3}  # deleted cluster: no file
    assert not (tmp_path / "gone").exists()


def test_pod_status_reports_the_ledger_count() -> None:
    pod = PodmanPod(0, "pm-0", "Running", {**RUNNING, "RestartCount": 0})
    assert pod_status(pod, restarts=2).restarts == 2 and pod_status(pod).restarts == 0
