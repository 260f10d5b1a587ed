"""The campaign's operational report says what happened (issue 41, item 11): an ensemble's restarts are its own
pods', its makespan is its batch job's as the lead recorded it, the requested-CPU samples step at a resize, a
scale-up's pod that ran nothing is named, and a podman campaign leaves no local-backend directory behind."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from broker.jobs.api import JobInfo
from elasticity.control.campaign import CampaignDecision
from elasticity.control.events import EventLog, read_events
from elasticity.control.ports import ClusterView, PodResize, PodView, ResizeOutcome, ScaleResult
from elasticity.model.node import Node
from miniclusters.api.campaign import CampaignSpec
from miniclusters.backends.base import BackendError, ExecResult
from miniclusters.campaign.plan import plan_campaign
from miniclusters.campaign.results import CampaignEvent, ensemble_results, member_results

SPEC = CampaignSpec.model_validate(
    {
        "ensembles": [
            {"name": "alpha", "parameter": "angleOfAttack", "values": [0]},
            {"name": "mach", "parameter": "mach", "values": [0.5]},
        ]
    }
)


def _sample(t: float, restarts: Mapping[int, int], cpu: Mapping[int, int]) -> CampaignEvent:
    return {
        "kind": "sample",
        "t": t,
        "size": len(cpu),
        "requested_m": sum(cpu.values()),
        "allocatable_m": 2000,
        "pods": {str(i): m for i, m in cpu.items()},
        "restarts": sum(restarts.values()),  # what the report read before: every pod's restarts together
        "pod_restarts": {str(i): n for i, n in restarts.items()},
    }


def _rows(tmp_path: Path, events: list[CampaignEvent]) -> dict[str, Any]:
    plan = plan_campaign(SPEC, tmp_path)
    return {r.ensemble: r for r in ensemble_results(plan, events, member_results(plan, events))}


def test_an_ensemble_counts_only_its_own_pods_restarts(tmp_path: Path) -> None:
    events: list[CampaignEvent] = [
        {"kind": "ensemble-running", "t": 1.0, "ensemble": "alpha", "pods": [0]},
        {"kind": "ensemble-running", "t": 1.0, "ensemble": "mach", "pods": [1]},
        _sample(1.0, {0: 0, 1: 0}, {0: 1000, 1: 1000}),
        _sample(2.0, {0: 0, 1: 1}, {0: 1000, 1: 1000}),  # pod 1's broker restarted
        _sample(3.0, {0: 0, 1: 1}, {0: 1000, 1: 1000}),
        {"kind": "ensemble-done", "t": 3.5, "ensemble": "mach", "pods": []},
        _sample(4.0, {0: 0}, {0: 1000}),  # pod 1 removed by a scale-down: its count is gone, not undone
        _sample(5.0, {0: 0, 1: 0}, {0: 1000, 1: 1000}),  # and played again by a scale-up, from 0
        {"kind": "ensemble-done", "t": 6.0, "ensemble": "alpha", "pods": []},
    ]
    rows = _rows(tmp_path, events)
    assert rows["alpha"].restarts == 0  # its pod never restarted
    assert rows["mach"].restarts == 1


def test_an_ensemble_s_makespan_is_its_batch_job_s(tmp_path: Path) -> None:
    """Seen on podman: observed running late (a look every few seconds), the ensemble's 2.88 s was shorter than
    its member's 5.9 s. The lead's t_run and t_cleanup are the clock the members' stamps use."""
    events: list[CampaignEvent] = [
        {"kind": "ensemble-running", "t": 10.0, "ensemble": "alpha", "pods": [0], "job_run": 1000.0},
        {"kind": "ensemble-done", "t": 12.88, "ensemble": "alpha", "pods": [], "job_end": 1006.2},
        {"kind": "ensemble-running", "t": 10.0, "ensemble": "mach", "pods": [1]},  # an older log: looks only
        {"kind": "ensemble-done", "t": 12.5, "ensemble": "mach", "pods": []},
    ]
    rows = _rows(tmp_path, events)
    assert rows["alpha"].makespan == 6.2 and rows["mach"].makespan == 2.5


def test_a_scale_up_s_pod_that_ran_nothing_is_named() -> None:
    from miniclusters.campaign.results import unused_scaled_pods

    events: list[CampaignEvent] = [
        {"kind": "scaled", "t": 15.5, "previous": 1, "size": 3},
        {"kind": "ensemble-running", "t": 16.0, "ensemble": "mach", "pods": [0]},
        {"kind": "member", "t": 17.0, "member": "m", "pods": [2, 2]},
        {"kind": "scaled", "t": 30.0, "previous": 3, "size": 1},
    ]
    assert unused_scaled_pods(events) == [1]


class _Cluster:
    """Observer, actuator and backend of one pod: a batch job per `flux batch`, resizes taken as asked."""

    def __init__(self) -> None:
        self.cpu = {0: 1000}
        self.jobs: dict[int, JobInfo] = {}

    def observe(self, name: str) -> ClusterView:
        pods = tuple(PodView(i, f"{name}-{i}", "Running", True, cpu_request=m) for i, m in self.cpu.items())
        return ClusterView(name, len(pods), 1, 2, pods, (Node("here", 2000),))

    def scale(self, name: str, size: int) -> ScaleResult:
        return ScaleResult(name, len(self.cpu), size)

    def resize_many(self, name: str, requests: Mapping[int, int]) -> dict[int, PodResize]:
        self.cpu.update(requests)
        return {i: PodResize(i, ResizeOutcome.DONE, cpu_requested=m) for i, m in requests.items()}

    def exec(self, name: str, index: int, argv: list[str]) -> ExecResult:
        if "batch" not in argv:
            raise BackendError("no queue here")  # the runner's queue view: empty
        job = 100 + len(self.jobs)
        self.jobs[job] = _info(job, "SCHED")
        return ExecResult(0, f"{job}\n", "")


def _info(job: int, state: str, t_run: float = 0.0, t_cleanup: float = 0.0) -> JobInfo:
    return JobInfo(
        job, state, "COMPLETED" if state == "INACTIVE" else "", 0, 1, 1, "", 0.0, "batch", 0, 16, 0,
        1.0, t_run, t_cleanup, t_cleanup, ranks="0" if t_run else "",
    )  # fmt: skip


class _Resize:
    """The plan: resize pod 0 to 300m once."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.done = False

    def decide(self, _obs: Any) -> CampaignDecision:
        if self.done:
            return CampaignDecision()
        self.done = True
        return CampaignDecision(cpu={0: 300})


def _runner(tmp_path: Path, cluster: _Cluster, clock: list[float]) -> Any:
    from miniclusters.campaign.runner import CampaignRunner, Loops

    plan = plan_campaign(SPEC, tmp_path)
    log = EventLog(tmp_path / "events.jsonl", "campaign", lambda: clock[0])
    runner = CampaignRunner(
        cluster,  # type: ignore[arg-type]  # backend, observer and actuator of one pod
        "c", plan, Loops(None, None), log, ["flux"], "", say=lambda _l: None, clock=lambda: clock[0],
        observer=cluster, actuator=cluster, jobs_of=lambda: dict(cluster.jobs),
    )  # fmt: skip
    runner.planner = _Resize()  # type: ignore[assignment]
    return runner


def test_the_requested_cpu_steps_at_the_resize_not_a_tick_later(tmp_path: Path) -> None:
    cluster, clock = _Cluster(), [0.0]
    runner = _runner(tmp_path, cluster, clock)
    runner.step()  # observes 1000m, resizes pod 0 to 300m
    clock[0] = 10.0
    runner.step()
    runner.log.close()
    events = list(read_events(tmp_path / "events.jsonl"))
    kinds = [e["kind"] for e in events]
    resize = kinds.index("resize")
    assert kinds[resize + 1] == "sample" and events[resize + 1]["requested_m"] == 300, events
    assert [e["requested_m"] for e in events if e["kind"] == "sample"] == [1000, 300, 300]
    assert round(runner.cpu_seconds, 3) == 3.0  # 300m from the resize on, not 1000m until the next look


def test_an_ensemble_that_ran_between_two_looks_keeps_its_run(tmp_path: Path) -> None:
    cluster, clock = _Cluster(), [0.0]
    runner = _runner(tmp_path, cluster, clock)
    runner.step()  # both submitted, seen queued
    first = min(cluster.jobs)
    cluster.jobs[first] = _info(first, "INACTIVE", t_run=1000.0, t_cleanup=1005.9)  # ran and ended meanwhile
    member = runner.plan.members[0].directory
    member.mkdir(parents=True)
    (member / "submitted").write_text("f1 1000.1\n")  # as its batch script records it
    (member / "ended").write_text("0 1005.8\n")
    clock[0] = 8.0
    runner.step()
    runner.log.close()
    events = list(read_events(tmp_path / "events.jsonl"))
    running = [e for e in events if e["kind"] == "ensemble-running"]
    done = [e for e in events if e["kind"] == "ensemble-done"]
    assert [(e["ensemble"], e["pods"], e["job_run"]) for e in running] == [("alpha", [0], 1000.0)]
    assert [(e["ensemble"], e["job_end"]) for e in done] == [("alpha", 1005.9)]
    rows = _rows(tmp_path, cast(list[CampaignEvent], events))  # the log as the runner wrote it (as report() reads it)
    assert rows["alpha"].makespan == 5.9 and rows["alpha"].pods == [0]


def test_a_podman_campaign_makes_no_local_lead_directory(tmp_path: Path, monkeypatch: Any) -> None:
    from miniclusters.backends.local.backend import LocalBackend
    from miniclusters.backends.podman.state import PodmanStore
    from miniclusters.campaign.session import _lead_copy

    monkeypatch.setenv("MINICLUSTERS_STATE_DIR", str(tmp_path))

    class Podman:
        ephemeral = True
        store = PodmanStore(tmp_path)

    assert _lead_copy(Podman(), "c") is None
    local = LocalBackend(state_dir=tmp_path, notify=lambda _m: None)
    assert _lead_copy(local, "c") == tmp_path / "c" / "pods" / "0" / "run" / "state" / "restful" / "controllers" / (
        "campaign.jsonl"
    )


def test_the_cluster_totals_are_read_back_from_the_event_log() -> None:
    """`up` following the operator's campaign has only the work directory: the cluster line came out as
    'None CPU-seconds requested, None resizes, None scale events' (seen on the real cluster)."""
    from miniclusters.campaign.results import cluster_totals

    events: list[CampaignEvent] = [
        _sample(0.0, {0: 0}, {0: 1000}),
        {"kind": "scaled", "t": 1.0, "previous": 1, "size": 2},
        _sample(2.0, {0: 0, 1: 0}, {0: 1000, 1: 1000}),
        {"kind": "resize", "t": 2.5, "pod": 1, "outcome": ResizeOutcome.DONE.value, "cpu_requested": 250},
        {"kind": "resize", "t": 2.5, "pod": 0, "outcome": ResizeOutcome.DEFERRED.value, "cpu_requested": 1900},
        {"kind": "resize", "t": 2.5, "pod": 0, "outcome": ResizeOutcome.INFEASIBLE.value, "cpu_requested": 9000},
        _sample(2.5, {0: 0, 1: 0}, {0: 1000, 1: 250}),
        _sample(4.5, {0: 0, 1: 0}, {0: 1000, 1: 250}),
    ]
    assert cluster_totals(events) == {"cpu_seconds_requested": 2.0 + 1.0 + 2.5, "resizes": 1, "scale_events": 1}
