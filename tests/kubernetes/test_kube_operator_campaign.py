"""The operator runs spec.campaign against the API fake: the same runner and one plan as `minicluster up`, the
ensembles submitted as `flux batch` sub-instances in the lead pod (through exec), the Indexed Job grown while an
ensemble waits and shrunk once they are done, pods resized in place from the members' PMPI duty cycles, and the
campaign's progress in the MiniCluster's ``Campaign`` condition and Events.

The lead is scripted (`flux batch|jobs|cancel`, `flux resource demand|drain`): a batch job runs on a free pod,
its members' records and PMPI traces appear in the shared work directory as the batch script would write them."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest

from broker.jobs.jobid import encode_f58
from common import idset
from elasticity.control.events import read_events
from elasticity.profiling.trace import EVENT_DTYPE, encode_trace
from miniclusters.api.spec import MiniCluster
from miniclusters.backends.base import ExecResult
from miniclusters.backends.kubernetes.api import JOB, MINICLUSTER
from miniclusters.backends.kubernetes.backend import KubernetesBackend
from miniclusters.backends.kubernetes.objects import custom_resource
from miniclusters.campaign.kube import kubernetes_campaign_starter
from miniclusters.campaign.plan import ENDED, SUBMITTED, CampaignPlan, batch_script, plan_campaign
from miniclusters.kube_shapes import Pod
from miniclusters.operator.conditions import find
from miniclusters.operator.controller import Controller
from miniclusters.operator.loop_types import ClusterKey
from miniclusters.testing.fake_exec import default_exec
from miniclusters.testing.fake_kube import FakeKube
from tests.kubernetes.recorded_events import recorded_events

KEY = ClusterKey(MINICLUSTER.api_version, "hpc", "demo")
RUNS_FOR = 20.0
"""Seconds a scripted member runs; its traces appear after PROFILED_AFTER."""
PROFILED_AFTER = 4.0
DUTY = 0.2


def campaign(workdir: Path) -> dict[str, Any]:
    return {
        "iterations": 15,
        "ranks": 2,
        "workdir": str(workdir),
        "ensembles": [
            {"name": "alpha", "parameter": "angleOfAttack", "values": [0, 4, 8]},
            {"name": "mach", "parameter": "mach", "values": [0.5, 0.6, 0.7]},
        ],
    }


def prepare_lightly(mc: MiniCluster, _say: Any) -> CampaignPlan:
    """session.prepare without OpenFOAM: the members' directories and the batch scripts."""
    assert mc.spec.campaign is not None
    plan = plan_campaign(mc.spec.campaign, Path(mc.spec.campaign.workdir))
    for ensemble in plan.ensembles:
        for member in ensemble.members:
            (member.directory / "pmpi").mkdir(parents=True, exist_ok=True)
        ensemble.script.write_text(batch_script(ensemble, plan.ranks, plan.profile_iterations, {}))
    return plan


def trace(rank: int, host: str) -> bytes:
    """Two ranks, DUTY of each 1 ms window computing, the rest in MPI_Allreduce."""
    t = np.arange(200, dtype=np.int64) * 1_000_000
    events = np.zeros(200, dtype=EVENT_DTYPE)
    events["call"], events["t_enter"], events["t_exit"] = 0, t + int(DUTY * 1_000_000), t + 1_000_000
    return encode_trace(rank, 2, events, ("MPI_Allreduce",), hostname=host)


@dataclass
class BatchJob:
    id: int
    name: str
    script: Path
    state: str = "SCHED"
    result: str = ""
    ranks: tuple[int, ...] = ()
    started: float = 0.0
    submitted: float = field(default_factory=time.time)
    """Wall-clock seconds, as Flux's t_submit (the runner's own wall clock is time.time)."""


@dataclass
class CampaignLead:
    """The lead broker as the runner sees it through exec: a queue of batch jobs on the pods that run."""

    clock: Any
    jobs: dict[int, BatchJob] = field(default_factory=dict)
    drained: frozenset[int] = frozenset()
    reason: str = ""
    fail: set[str] = field(default_factory=set)
    """Members whose solver exits 1."""

    def __call__(self, fake: FakeKube, pod: Pod, argv: list[str]) -> ExecResult:
        words = argv[4:] if argv[:2] == ["sh", "-c"] else argv
        if not words or not words[0].endswith("flux"):
            return default_exec(fake, pod, argv)
        self.advance(fake)
        verb = words[1:3]
        if verb[0] == "batch":
            job = BatchJob(
                len(self.jobs) + 1,
                next(w.split("=", 1)[1] for w in words if w.startswith("--job-name=")),
                Path(words[-1]),
            )
            self.jobs[job.id] = job
            self.advance(fake)
            return ExecResult(0, encode_f58(job.id) + "\n", "")
        if verb[0] == "jobs":
            records = [
                {"id": j.id, "state": j.state, "result": j.result, "name": j.name, "nnodes": 1, "t_submit": j.submitted,
                 "nodelist": ",".join(f"demo-{r}" for r in j.ranks)}
                for j in self.jobs.values()
            ]  # fmt: skip
            return ExecResult(0, json.dumps({"jobs": records}), "")
        if verb[0] == "cancel":
            job = self.jobs[int(words[2])]
            job.state, job.result = "INACTIVE", "CANCELED"
            return ExecResult(0, "", "")
        if verb == ["resource", "demand"]:
            pending = [{"id": j.id, "nnodes": 1, "duration": 0.0} for j in self.jobs.values() if j.state == "SCHED"]
            running = [{"ranks": list(j.ranks)} for j in self.jobs.values() if j.state == "RUN"]
            reasons = {str(r): {"reason": self.reason, "timestamp": 0.0} for r in self.drained}
            answer = {"pending": pending, "running": running, "drained": sorted(self.drained), "drain": reasons}
            return ExecResult(0, json.dumps(answer), "")
        if words[1:4] == ["resource", "drain", "--set"]:
            self.drained, self.reason = frozenset(idset.decode(words[4])), words[5]
            return ExecResult(0, "{}", "")
        return ExecResult(1, "", f"unscripted: {words}")

    def lose(self, pod: int) -> None:
        """The pod's broker died: its batch job ends failed, its members without an end record."""
        for job in self.jobs.values():
            if job.state == "RUN" and pod in job.ranks:
                job.state, job.result = "INACTIVE", "FAILED"

    def advance(self, fake: FakeKube) -> None:
        """Start waiting jobs on free running pods; write the members' records as their batch scripts would."""
        now = self.clock()
        up = {i for i, p in fake.pods_of("demo", "hpc").items() if p["status"]["phase"] == "Running"}
        busy = {r for j in self.jobs.values() if j.state == "RUN" for r in j.ranks}
        for job in self.jobs.values():
            members = sorted(p for p in job.script.parent.iterdir() if p.is_dir())
            if job.state == "SCHED":
                free = sorted(up - busy - self.drained)
                if free:
                    job.state, job.ranks, job.started = "RUN", (free[0],), now
                    busy.add(free[0])
                    for m in members:
                        (m / SUBMITTED).write_text(f"f{m.name} {now}\n")
            if job.state != "RUN":
                continue
            if now - job.started >= PROFILED_AFTER:
                for m in members:
                    for rank in range(2):
                        path = m / "pmpi" / f"pmpi.{m.name}.{rank}.bin"
                        if not path.exists():
                            path.write_bytes(trace(rank, f"demo-{job.ranks[0]}"))
            if now - job.started >= RUNS_FOR:
                for m in members:
                    (m / "log.rhoSimpleFoam").write_text("Time = 14\n\nTime = 15\n")
                    (m / ENDED).write_text(f"{1 if m.name in self.fail else 0} {now}\n")
                job.state, job.result = "INACTIVE", "COMPLETED"


@pytest.fixture
def lead(fake: FakeKube, clock) -> CampaignLead:
    scripted = CampaignLead(clock)
    fake.exec_handler = scripted
    return scripted


@pytest.fixture
def operator(fake: FakeKube, clock) -> Controller:
    def backend_for(namespace: str) -> KubernetesBackend:
        return KubernetesBackend(api=fake, namespace=namespace, clock=clock, sleep=clock.sleep, resize_wait=5.0)

    start = kubernetes_campaign_starter(fake, prepare_lightly, backend_for, flux=["/opt/miniclusters/bin/flux"])
    return Controller(fake, namespace="hpc", clock=clock, wall=clock.wall, campaign_start=start)


def _settle(operator: Controller, clock) -> None:
    operator.run_until_idle(advance=clock.advance)


def _tick(operator: Controller, clock, seconds: float = 2.0) -> None:
    clock.advance(seconds)
    assert operator.campaigns is not None
    operator.campaigns.step_due()
    _settle(operator, clock)


def _condition(fake: FakeKube) -> tuple[str, str, str]:
    condition = find(fake.stored(MINICLUSTER, "demo")["status"]["conditions"], "Campaign")
    assert condition is not None
    return condition["status"], condition["reason"], condition["message"]


def _reasons(fake: FakeKube) -> list[str]:
    return [e["reason"] for e in recorded_events(fake) if e["action"] == "Campaign"]


def _requests(fake: FakeKube) -> dict[int, str]:
    return {
        i: p["spec"]["containers"][0]["resources"]["requests"]["cpu"] for i, p in fake.pods_of("demo", "hpc").items()
    }


def test_the_operator_runs_a_campaign_growing_the_job_and_reporting_in_status(
    fake: FakeKube, operator: Controller, clock: Any, make_mc: Any, lead: CampaignLead, tmp_path: Path
) -> None:
    fake.node_cpu = "4"
    autoscale = {"enabled": True, "idleSeconds": 4, "cooldownSeconds": 0, "intervalSeconds": 2}
    mc = make_mc(
        size=1, minSize=1, maxSize=2, autoscale=autoscale, multiplexing={"enabled": True},
        campaign=campaign(tmp_path / "work"),
    )  # fmt: skip
    fake.create(custom_resource(mc, "hpc"))
    operator.start()
    _settle(operator, clock)
    assert operator.campaigns is not None and KEY in operator.campaigns.loops
    assert operator.autoscalers is None and operator.multiplexers is None  # the campaign's runner has both loops
    status, reason, message = _condition(fake)
    assert (status, reason) == ("True", "Started") and "2 ensembles, 6 members" in message

    sizes, requests = [], []
    for _ in range(60):
        _tick(operator, clock)
        sizes.append(fake.stored(JOB, "demo")["spec"]["parallelism"])
        requests.append(_requests(fake))
        if _condition(fake)[1] != "Running" and _condition(fake)[1] != "Started":
            break
    status, reason, message = _condition(fake)
    assert (status, reason) == ("True", "Done"), message
    assert message.startswith("6/6 members completed") and "alpha done" in message and "mach done" in message
    assert sizes[0] == 2 and max(sizes) == 2, "the Job grew to 2 pods for the waiting ensemble"
    assert sizes[-1] == 1, "and shrank back once both ensembles were done"
    assert sorted({j.ranks[0] for j in lead.jobs.values()}) == [0, 1], "each ensemble ran as a sub-instance on a pod"
    assert any(r.get(0) not in (None, "1") for r in requests), "the profiled pod was resized in place"
    reasons = _reasons(fake)
    assert reasons[0] == "Started" and "EnsembleRunning" in reasons and reasons.count("MemberDone") == 6
    events = list(read_events(tmp_path / "work" / "events.jsonl"))
    kinds = [e["kind"] for e in events]
    assert kinds[0] == "campaign-start" and kinds[-1] == "campaign-end"
    assert {e["ensemble"] for e in events if e["kind"] == "submitted"} == {"alpha", "mach"}
    assert any(e["kind"] == "scaled" and e["size"] == 2 for e in events)
    assert any(e["kind"] == "resize" and e["outcome"] != "deferred" for e in events)


def test_a_failed_member_is_reported_and_removing_the_campaign_cancels_it(
    fake: FakeKube, operator: Controller, clock: Any, make_mc: Any, lead: CampaignLead, tmp_path: Path
) -> None:
    lead.fail = {"alpha-1"}
    data = campaign(tmp_path / "work")
    data["ensembles"] = data["ensembles"][:1]
    fake.create(custom_resource(make_mc(size=1, minSize=1, maxSize=1, campaign=data), "hpc"))
    operator.start()
    _settle(operator, clock)
    for _ in range(30):
        _tick(operator, clock)
        if _condition(fake)[1] not in ("Started", "Running"):
            break
    status, reason, message = _condition(fake)
    assert (status, reason) == ("False", "DoneWithFailures") and message.startswith("2/3 members completed"), message
    assert "1 failed" in message and _reasons(fake).count("MemberFailed") == 1

    # a second campaign, removed while it runs: its sub-instance is cancelled through the lead
    data["ensembles"][0].update(name="beta", values=[2, 6])
    fake.patch(MINICLUSTER, "hpc", "demo", {"spec": {"campaign": data}})
    _settle(operator, clock)
    _tick(operator, clock)
    running = [j for j in lead.jobs.values() if j.state == "RUN"]
    assert [j.name for j in running] == ["beta"], (lead.jobs, _condition(fake), _reasons(fake))
    fake.patch(MINICLUSTER, "hpc", "demo", {"spec": {"campaign": None}})
    _settle(operator, clock)
    assert running[0].result == "CANCELED"
    assert _condition(fake)[:2] == ("False", "Cancelled")
    assert operator.campaigns is not None and KEY not in operator.campaigns.loops


def test_members_of_a_lost_sub_instance_run_again_not_dropped(
    fake: FakeKube, operator: Controller, clock: Any, make_mc: Any, lead: CampaignLead, tmp_path: Path
) -> None:
    data = campaign(tmp_path / "work")
    data["ensembles"] = data["ensembles"][:1]
    fake.create(custom_resource(make_mc(size=1, minSize=1, maxSize=1, campaign=data), "hpc"))
    operator.start()
    _settle(operator, clock)
    _tick(operator, clock)
    _tick(operator, clock)
    lead.lose(0)  # mid-run: the members were submitted, none ended
    for _ in range(30):
        _tick(operator, clock)
        if _condition(fake)[1] not in ("Started", "Running"):
            break
    assert _condition(fake)[:2] == ("True", "Done"), _condition(fake)
    assert [j.result for j in lead.jobs.values()] == ["FAILED", "COMPLETED"], "the ensemble ran again"
    events = list(read_events(tmp_path / "work" / "events.jsonl"))
    (rerun,) = [e for e in events if e["kind"] == "ensemble-rerun"]
    assert rerun["ensemble"] == "alpha" and rerun["members"] == ["alpha-0", "alpha-1", "alpha-2"]


def _second_operator(fake: FakeKube, clock: Any) -> Controller:
    """Another replica taking over: a new controller on the same API, knowing only what the cluster records."""

    def backend_for(namespace: str) -> KubernetesBackend:
        return KubernetesBackend(api=fake, namespace=namespace, clock=clock, sleep=clock.sleep, resize_wait=5.0)

    start = kubernetes_campaign_starter(fake, prepare_lightly, backend_for, flux=["/opt/miniclusters/bin/flux"])
    return Controller(fake, namespace="hpc", clock=clock, wall=clock.wall, campaign_start=start)


def _run_to_the_end(operator: Controller, clock: Any, fake: FakeKube, ticks: int = 60) -> None:
    for _ in range(ticks):
        _tick(operator, clock)
        if _condition(fake)[1] not in ("Started", "Running"):
            return


def test_an_operator_taking_over_mid_campaign_resumes_it_submitting_nothing_twice(
    fake: FakeKube, operator: Controller, clock: Any, make_mc: Any, lead: CampaignLead, tmp_path: Path
) -> None:
    fake.node_cpu = "4"
    autoscale = {"enabled": True, "idleSeconds": 4, "cooldownSeconds": 0, "intervalSeconds": 2}
    data = campaign(tmp_path / "work")
    data["sequential"] = True  # mach is submitted only after alpha ended: the new operator must submit it, once
    mc = make_mc(size=1, minSize=1, maxSize=2, autoscale=autoscale, multiplexing={"enabled": True}, campaign=data)
    fake.create(custom_resource(mc, "hpc"))
    operator.start()
    _settle(operator, clock)
    for _ in range(6):
        _tick(operator, clock)
    recorded = fake.stored(MINICLUSTER, "demo")["status"]["campaign"]
    assert set(recorded["jobs"]) == {"alpha"} and "outcome" not in recorded, recorded
    assert [j.state for j in lead.jobs.values()] == ["RUN"]
    done_before = _reasons(fake).count("MemberDone")

    # the leader is gone (nothing of it runs any more); another replica starts from what the cluster records
    successor = _second_operator(fake, clock)
    successor.start()
    _settle(successor, clock)
    status, reason, message = _condition(fake)
    assert (status, reason) == ("True", "Started") and message.startswith("resumed: 1 of 2 ensembles"), message
    _run_to_the_end(successor, clock, fake)
    status, reason, message = _condition(fake)
    assert (status, reason) == ("True", "Done") and message.startswith("6/6 members completed"), message
    assert sorted(j.name for j in lead.jobs.values()) == ["alpha", "mach"], "each ensemble submitted once"
    assert _reasons(fake).count("MemberDone") == 6, "each member reported done once, across both operators"
    assert done_before < 6
    events = list(read_events(tmp_path / "work" / "events.jsonl"))
    kinds = [e["kind"] for e in events]
    assert kinds.count("campaign-start") == 1 and kinds.count("campaign-resume") == 1 and kinds[-1] == "campaign-end"
    assert [e["ensemble"] for e in events if e["kind"] == "ensemble-running"] == ["alpha", "mach"]
    assert [e["ensemble"] for e in events if e["kind"] == "submitted"] == ["alpha", "mach"]
    assert fake.stored(MINICLUSTER, "demo")["status"]["campaign"]["outcome"] == "done"

    # and a third operator finds it ended: nothing runs again
    third = _second_operator(fake, clock)
    third.start()
    _settle(third, clock)
    assert third.campaigns is not None and KEY not in third.campaigns.loops and len(lead.jobs) == 2
    assert _condition(fake)[1] == "Done"


def test_a_submission_the_dead_operator_did_not_record_is_adopted_from_the_lead(
    fake: FakeKube, operator: Controller, clock: Any, make_mc: Any, lead: CampaignLead, tmp_path: Path
) -> None:
    fake.node_cpu = "4"
    data = campaign(tmp_path / "work")
    fake.create(custom_resource(make_mc(size=2, minSize=2, maxSize=2, campaign=data), "hpc"))
    operator.start()
    _settle(operator, clock)
    _tick(operator, clock)
    assert sorted(j.name for j in lead.jobs.values()) == ["alpha", "mach"]
    # it died after `flux batch` of mach answered, before status.campaign said so
    stored = fake.stored(MINICLUSTER, "demo")
    jobs = stored["status"]["campaign"]["jobs"]
    del jobs["mach"]
    record = {**stored["status"]["campaign"], "jobs": jobs}
    fake.replace({**stored, "status": {**stored["status"], "campaign": record}}, "status")

    successor = _second_operator(fake, clock)
    successor.start()
    _settle(successor, clock)
    _run_to_the_end(successor, clock, fake)
    assert _condition(fake)[:2] == ("True", "Done"), _condition(fake)
    assert sorted(j.name for j in lead.jobs.values()) == ["alpha", "mach"], "mach was not submitted again"
    events = list(read_events(tmp_path / "work" / "events.jsonl"))
    (resume,) = [e for e in events if e["kind"] == "campaign-resume"]
    assert resume["adopted"] == ["mach"]


def test_a_record_of_another_spec_or_an_unreadable_one_starts_the_campaign_afresh(tmp_path: Path) -> None:
    from miniclusters.api.campaign import CampaignSpec
    from miniclusters.api.fingerprint import fingerprint
    from miniclusters.api.status import StatusJson
    from miniclusters.campaign.progress import CampaignProgress

    spec = CampaignSpec.model_validate(campaign(tmp_path))
    other = CampaignSpec.model_validate({**campaign(tmp_path), "iterations": 16})
    progress = CampaignProgress(fingerprint(spec), {"alpha": 1234}, {"alpha": 1}, ("mach",), 5.0)
    back = CampaignProgress.from_status({"campaign": progress.to_status()})
    assert back == progress and back.belongs_to(spec) and not back.belongs_to(other)
    malformed = cast(StatusJson, {"campaign": {"spec": "x", "jobs": {"alpha": "not-a-job"}}})  # refused: None
    assert CampaignProgress.from_status(malformed) is None
    assert CampaignProgress.from_status({}) is None and CampaignProgress.from_status(None) is None


def _operator_preparing_in_the_lead(fake: FakeKube, clock: Any) -> Controller:
    def backend_for(namespace: str) -> KubernetesBackend:
        return KubernetesBackend(api=fake, namespace=namespace, clock=clock, sleep=clock.sleep, resize_wait=5.0)

    start = kubernetes_campaign_starter(fake, None, backend_for, flux=["/opt/miniclusters/bin/flux"])
    return Controller(fake, namespace="hpc", clock=clock, wall=clock.wall, campaign_start=start)


@pytest.mark.parametrize("lead_does", ["prepare", "fail", "write-elsewhere"])
def test_the_cases_are_prepared_in_the_lead_pod_where_openfoam_is(
    fake: FakeKube, clock: Any, make_mc: Any, lead: CampaignLead, tmp_path: Path, lead_does: str
) -> None:
    """The operator's image has no OpenFOAM: `minicluster campaign prepare --spec-json` runs in the lead pod
    (from the bundle the init container copied) and writes to the shared work directory."""
    from miniclusters.api.load import load_minicluster

    seen: list[list[str]] = []

    def in_lead(fake_: FakeKube, pod: Pod, argv: list[str]) -> ExecResult:
        if not argv[0].endswith("/bin/minicluster"):
            return lead(fake_, pod, argv)
        seen.append(argv)
        if lead_does == "fail":
            return ExecResult(1, "preparing 3 members\n", "error: preparing the cases: blockMesh failed\n")
        if lead_does == "prepare":
            prepare_lightly(load_minicluster(json.loads(argv[-1])), None)
        return ExecResult(0, "cases ready in 3.2s\n", "")

    fake.exec_handler = in_lead
    data = campaign(tmp_path / "work")
    data["ensembles"] = data["ensembles"][:1]
    fake.create(custom_resource(make_mc(size=1, minSize=1, maxSize=1, campaign=data), "hpc"))
    operator = _operator_preparing_in_the_lead(fake, clock)
    operator.start()
    _settle(operator, clock)
    assert [argv[:4] for argv in seen] == [["/mnt/miniclusters/bin/minicluster", "campaign", "prepare", "--spec-json"]]
    status, reason, message = _condition(fake)
    if lead_does == "prepare":
        assert (status, reason) == ("True", "Started"), message
        _run_to_the_end(operator, clock, fake)
        assert _condition(fake)[:2] == ("True", "Done")
    elif lead_does == "fail":
        assert (status, reason) == ("False", "LoopFailed") and "exit 1" in message and "blockMesh failed" in message
        # reconciles do not prepare again at once (it is costly), only once START_RETRY passed
        fake.patch(MINICLUSTER, "hpc", "demo", {"metadata": {"labels": {"touched": "1"}}})
        _settle(operator, clock)
        assert len(seen) == 1
        clock.advance(31.0)
        fake.patch(MINICLUSTER, "hpc", "demo", {"metadata": {"labels": {"touched": "2"}}})
        _settle(operator, clock)
        assert len(seen) == 2
    else:
        assert (status, reason) == ("False", "LoopFailed") and "--campaign-volume" in message, message
