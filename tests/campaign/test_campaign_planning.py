"""The campaign's pure planning: members and batch scripts from the spec, per-pod CPU from duty cycles, and one
decision from the two loops with their disagreements settled and said."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from elasticity.control.campaign import (
    CampaignObservation,
    CampaignPlanner,
    EnsembleView,
    MemberView,
    MultiplexKnobs,
    arbitrate,
    pod_needs,
)
from elasticity.control.ports import ClusterView, PodView
from elasticity.model.node import Node
from elasticity.policy.autoscale import AutoscaleMemory, AutoscaleOptions, QueueView, ScalePlan
from miniclusters.api.campaign import CampaignSpec
from miniclusters.campaign.plan import ENDED, SUBMITTED, batch_script, batch_submit, member_submit, plan_campaign

SPEC = CampaignSpec.model_validate(
    {
        "iterations": 7,
        "ranks": 2,
        "profileIterations": 300,
        "ensembles": [
            {"name": "alpha", "parameter": "angleOfAttack", "values": [0, 4, 8]},
            {"name": "mach", "parameter": "mach", "values": [0.5, 0.6], "nodes": 2},
        ],
    }
)
KNOBS = MultiplexKnobs(rigid_m=1000, headroom=1.0, floor_m=50, overhead_m=100)


def test_members_in_spec_order_each_in_its_own_directory(tmp_path: Path) -> None:
    plan = plan_campaign(SPEC, tmp_path)
    assert [m.name for m in plan.members] == ["alpha-0", "alpha-1", "alpha-2", "mach-0", "mach-1"]
    assert [m.value for m in plan.members] == [0, 4, 8, 0.5, 0.6]
    assert plan.members[4].directory == tmp_path / "mach" / "mach-1"
    assert plan.ensemble("mach").nodes == 2
    assert batch_submit(plan.ensemble("mach"), ["flux"])[:4] == ["flux", "batch", "-N", "2"]


def test_batch_script_submits_every_member_then_records_each_end(tmp_path: Path) -> None:
    ensemble = plan_campaign(SPEC, tmp_path).ensemble("alpha")
    script = batch_script(ensemble, 2, 300, {"WM_PROJECT": "OpenFOAM", "ODD": "a b"})
    lines = script.splitlines()
    assert lines[0] == "#!/bin/sh" and "export ODD='a b'" in lines
    submits = [line for line in lines if "flux submit" in line]
    waits = [line for line in lines if "flux job wait" in line]
    assert len(submits) == len(waits) == 3
    # every member is submitted before the first wait: they run at once in the sub-instance
    assert lines.index(submits[-1]) < lines.index(waits[0])
    assert f"{ensemble.members[1].directory}/{SUBMITTED}" in submits[1]
    assert f"{ensemble.members[2].directory}/{ENDED}" in waits[2]
    assert lines[-1] == "exit 0"  # a failed member never fails (or stops) its ensemble
    argv = member_submit(ensemble.members[0], 2, 1, 300)
    assert argv[argv.index("-n") + 1] == "2" and "pmpi=300" in argv and "pmpi-boundary=MPI_Allreduce" in argv
    assert "--flags=waitable" in argv  # its `flux job wait ID` is refused by flux-core otherwise
    assert argv[-4:] == ["rhoSimpleFoam", "-parallel", "-case", str(ensemble.members[0].directory)]
    assert shlex.split(submits[0].split("$(", 1)[1].split(")", 1)[0]) == argv


def _member(
    name: str, state: str = "running", duty: tuple[float, ...] | None = None, pods: tuple[int, ...] = (0, 0)
) -> MemberView:
    return MemberView(name, state, 3, duty, pods if duty is not None else None)  # type: ignore[arg-type]


def test_unprofiled_ensembles_hold_the_rigid_request_profiled_ones_what_their_ranks_use() -> None:
    profiled = EnsembleView("a", "running", (0,), (_member("a-0", duty=(0.1, 0.5)), _member("a-1", duty=(0.1, 0.3))))
    unprofiled = EnsembleView("b", "running", (1,), (_member("b-0"),))
    needs = pod_needs((profiled, unprofiled), (0, 1, 2), KNOBS)
    # four ranks shared pod 0's 1000m while profiled: 250m each; need = sum(duty) * 250m + broker overhead
    assert needs[0] == 100 + round((0.1 + 0.5 + 0.1 + 0.3) * 250)
    assert needs[1] == 1000
    assert needs[2] == 100  # idle: its broker only
    assert pod_needs((profiled, unprofiled), (2,), KNOBS, waiting=True)[2] == 1000  # an ensemble is about to land
    finished = EnsembleView("a", "running", (0,), (_member("a-0", "done"), _member("a-1", "failed")))
    assert pod_needs((finished,), (0,), KNOBS)[0] == 100  # members over, the batch job still ending


def _view(size: int, requests: dict[int, int], allocatable: int = 2000) -> ClusterView:
    pods = tuple(PodView(i, f"c-{i}", "Running", True, requests.get(i, 1000)) for i in range(size))
    return ClusterView("c", size, 0, 3, pods, (Node("host", allocatable),))


def _obs(
    view: ClusterView, queue: QueueView | None = None, ensembles: tuple[EnsembleView, ...] = ()
) -> CampaignObservation:
    return CampaignObservation(10.0, view, queue or QueueView(), tuple(ensembles))


def test_shrink_wins_over_a_resize_of_the_pod_it_removes() -> None:
    plan = ScalePlan(1, frozenset({1}), AutoscaleMemory(), "idle")
    decision, said = arbitrate(plan, {0: 300, 1: 100}, _obs(_view(2, {})), KNOBS, frozenset())
    assert decision.size == 1 and decision.cpu == {0: 300}
    assert len(said) == 1 and said[0].winner == "autoscale" and said[0].pod == 1 and "idle" in said[0].why


def test_grow_without_headroom_is_a_disagreement_the_waiting_queue_wins() -> None:
    plan = ScalePlan(3, frozenset(), AutoscaleMemory(), "1 pending job needs 3 nodes")
    queue = QueueView(pending=(1,))
    decision, said = arbitrate(plan, {}, _obs(_view(2, {0: 1000, 1: 1000}), queue), KNOBS, frozenset())
    assert decision.size == 3
    assert [d.winner for d in said] == ["autoscale"] and "3000m requested > 2000m" in said[0].multiplex


def test_requests_over_the_allocatable_cpu_lower_the_unprofiled_pods_only() -> None:
    view = _view(3, {0: 100, 1: 100, 2: 100}, allocatable=2000)
    decision, said = arbitrate(None, {0: 900, 1: 1000, 2: 1000}, _obs(view), KNOBS, frozenset({0}))
    after = {0: 100, 1: 100, 2: 100, **decision.cpu}
    assert after[0] == 900  # the measured need stands
    assert after[1] + after[2] == 1100 and sum(after.values()) == 2000  # the rigid ones give way
    assert said and all(d.pod in (1, 2) for d in said)


def test_planner_grows_for_a_waiting_ensemble_and_logs_the_disagreement() -> None:
    planner = CampaignPlanner(AutoscaleOptions(idle_seconds=5, cooldown_seconds=0), KNOBS)
    running = EnsembleView("a", "running", (0,), (_member("a-0"),))
    queued = EnsembleView("b", "queued")
    queue = QueueView(pending=(1,), running=((0,),))
    decision = planner.decide(_obs(_view(1, {0: 1000}, allocatable=1500), queue, (running, queued)))
    assert decision.size == 2
    assert decision.cpu == {}  # pod 0 is unprofiled: it keeps its rigid 1000m
    assert [e["event"] for e in planner.events] == ["disagreement"]
    assert planner.events[0]["winner"] == "autoscale"


def test_without_loops_nothing_changes() -> None:
    planner = CampaignPlanner(None, None)
    decision = planner.decide(_obs(_view(2, {}), QueueView(pending=(1,))))
    assert decision.size is None and decision.cpu == {} and decision.drain is None


@pytest.mark.parametrize("count", [1, 4])
def test_idle_cluster_shrinks_after_idle_seconds(count: int) -> None:
    planner = CampaignPlanner(AutoscaleOptions(idle_seconds=5, cooldown_seconds=0), KNOBS)
    view = _view(count + 1, {})
    leaving = frozenset(range(1, count + 1))
    first = planner.decide(CampaignObservation(0.0, view, QueueView(), ()))
    assert first.size is None and first.drain == frozenset()  # surplus, not yet for idleSeconds
    drain = planner.decide(CampaignObservation(6.0, view, QueueView(), ()))
    assert drain.size is None and drain.drain == leaving  # drained first: no new ensemble lands there
    shrink = planner.decide(CampaignObservation(7.0, view, QueueView(draining=leaving, owned=leaving), ()))
    assert shrink.size == 1 and shrink.cpu == {0: 100}  # the idle lead keeps only its broker's CPU


def test_reset_member_forgets_a_run_but_keeps_the_case(tmp_path: Path) -> None:
    from miniclusters.campaign.plan import reset_member

    member = plan_campaign(SPEC, tmp_path).members[0]
    (member.directory / "pmpi").mkdir(parents=True)
    (member.directory / "pmpi" / "pmpi.1.0.bin").write_bytes(b"x")
    (member.directory / "postProcessing" / "forceCoeffs").mkdir(parents=True)
    (member.directory / "processor0").mkdir()
    for name in (SUBMITTED, ENDED, "log.rhoSimpleFoam", "error.txt"):
        (member.directory / name).write_text("1 2\n")
    reset_member(member, tmp_path)
    assert sorted(p.name for p in member.directory.iterdir()) == ["pmpi", "processor0"]
    assert not any((member.directory / "pmpi").iterdir())


def test_campaign_commands_on_a_cluster_without_a_campaign(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from miniclusters.cli import main

    monkeypatch.setenv("MINICLUSTERS_STATE_DIR", str(tmp_path))
    for verb in ("status", "results", "cancel"):
        result = CliRunner().invoke(main, ["campaign", verb, "nothing-here"])
        assert result.exit_code == 1, (verb, result.output)
        assert "nothing-here" in result.output


def test_work_directory_is_mounted_at_the_same_path_in_every_pod(tmp_path: Path) -> None:
    """In containers (podman) the batch scripts write the members' records where the runner reads them."""
    from miniclusters.api import load_minicluster
    from miniclusters.campaign.session import with_shared_workdir
    from miniclusters.render import RenderOptions, render_minicluster

    mc = load_minicluster(
        {
            "apiVersion": "miniclusters.dev/v1alpha1",
            "kind": "MiniCluster",
            "metadata": {"name": "camp"},
            "spec": {"size": 2, "containers": [{"image": "x"}], "campaign": SPEC.model_dump(by_alias=True)},
        }
    )
    work = tmp_path / "work"
    shared = with_shared_workdir(mc, work)
    job = next(o for o in render_minicluster(shared, RenderOptions()) if o["kind"] == "Job")
    pod = job["spec"]["template"]["spec"]
    volume = next(v for v in pod["volumes"] if v.get("hostPath") == {"path": str(work)})
    runner = next(c for c in pod["containers"] if c["name"] == "camp")
    assert {"name": volume["name"], "mountPath": str(work)} in runner["volumeMounts"]
    assert with_shared_workdir(shared, work) == shared  # already mounted there: left as it is


def test_a_batch_script_s_exports_read_back_are_what_it_was_written_with(tmp_path: Path) -> None:
    from miniclusters.campaign.plan import script_exports

    spec = CampaignSpec.model_validate(
        {"iterations": 5, "ranks": 2, "ensembles": [{"name": "a", "parameter": "mach", "values": [0.5]}]}
    )
    (ensemble,) = plan_campaign(spec, tmp_path).ensembles
    env = {"WM_PROJECT_DIR": "/usr/lib/openfoam/openfoam1912", "FOAM_X": "a b 'c'", "EMPTY": "", "EQ": "k=v"}
    assert script_exports(batch_script(ensemble, 2, 100, env)) == env
