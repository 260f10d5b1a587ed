"""A whole campaign for `minicluster up`: prepare the cases, bring the cluster up at its size, run, report, tear down.

One campaign per cluster on this machine: a lock (`<state>/.campaign/<name>.lock`, holding the pid) tells
`minicluster campaign cancel` and `minicluster down` whom to stop; its state file (`<name>.json`) feeds
`minicluster status` and `minicluster campaign status`.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any, cast

from common.tee import Tee
from elasticity.control.campaign import MultiplexKnobs
from elasticity.control.events import EventLog, read_events
from elasticity.figures.campaign import plot_campaign_timeline
from elasticity.policy.autoscale import AutoscaleOptions
from elasticity.workloads.foam import foam_variables
from miniclusters import workdirs
from miniclusters.api.campaign import CampaignJson, CampaignSpec
from miniclusters.api.quantity import parse_quantity
from miniclusters.api.spec import ContainerVolume, MiniCluster
from miniclusters.campaign.figures import plot_polar
from miniclusters.campaign.observe import exec_jobs
from miniclusters.campaign.plan import CampaignPlan, batch_script, plan_campaign
from miniclusters.campaign.results import (
    CampaignEvent,
    cluster_totals,
    ensemble_results,
    member_results,
    unused_scaled_pods,
    write_tables,
)
from miniclusters.campaign.runner import CampaignRunner, Loops
from miniclusters.campaign.state_file import (
    CampaignState,
    EnsembleRow,
    LiveFields,
    MemberRow,
    Report,
    save_state,
)

MPI_SETTINGS = {"OMPI_MCA_mpi_yield_when_idle": "1", "OMPI_MCA_btl": "tcp,self"}
DEFAULT_RIGID_M = 1000


def plan_of(mc: MiniCluster) -> CampaignPlan:
    spec = mc.spec.campaign
    assert spec is not None
    return plan_campaign(spec, workdirs.workdir_for("campaign", mc.name, spec.workdir))


def claim_workdir(mc: MiniCluster) -> Path:
    """The work directory checked to be ours and marked (miniclusters/workdirs.py), or SpecError naming
    spec.campaign.workdir: before anything is written or deleted there."""
    spec = mc.spec.campaign
    assert spec is not None
    path = workdirs.workdir_for("campaign", mc.name, spec.workdir)
    return workdirs.claim(path, "spec.campaign.workdir", mc.name, "campaign", ours=not spec.workdir)


def rigid_request_m(mc: MiniCluster) -> int:
    """The runner container's CPU request (what every pod holds before profiling)."""
    container = mc.spec.containers[mc.spec.flux_runner_index]
    cpu = container.resources.requests.get("cpu")
    return round(parse_quantity(str(cpu)) * 1000) if cpu is not None else DEFAULT_RIGID_M


def loops_of(mc: MiniCluster) -> Loops:
    spec = mc.spec
    autoscale = (
        AutoscaleOptions(spec.autoscale.idle_seconds, spec.autoscale.cooldown_seconds, spec.autoscale.policy)
        if spec.autoscale.enabled
        else None
    )
    multiplex = (
        MultiplexKnobs(rigid_request_m(mc), headroom=spec.multiplexing.headroom) if spec.multiplexing.enabled else None
    )
    interval = min(spec.autoscale.interval_seconds, 2.0) if spec.autoscale.enabled else 1.0
    return Loops(autoscale, multiplex, interval)


def prepare(mc: MiniCluster, say: Callable[[str], None]) -> CampaignPlan:
    """Cases and batch scripts on disk (before the cluster starts: a broken OpenFOAM install stops nothing)."""
    from miniclusters.campaign.cases import prepare_base, prepare_members

    spec = mc.spec.campaign
    assert spec is not None
    plan = plan_of(mc)
    claim_workdir(mc)
    for stale in ("events.jsonl", "polar.png", "timeline.png", "results.csv", "report.json"):
        workdirs.remove_file(plan.workdir / stale, plan.workdir)
    started = time.monotonic()
    say(f"preparing {len(plan.members)} members of {len(plan.ensembles)} ensembles in {plan.workdir}")
    base = prepare_base(plan, spec.decomposition, spec.weights)
    prepare_members(plan, base, say)
    env = script_env()
    for ensemble in plan.ensembles:
        ensemble.script.write_text(batch_script(ensemble, plan.ranks, plan.profile_iterations, env))
        ensemble.script.chmod(0o755)
    say(f"cases ready in {time.monotonic() - started:.1f}s")
    return plan


WORKDIR_VOLUME = "campaign-workdir"


def with_shared_workdir(mc: MiniCluster, workdir: Path) -> MiniCluster:
    """The spec with the work directory mounted at the same path in every pod (a hostPath volume on the runner
    container): in containers (podman) the batch scripts write each member's records and traces where the runner
    reads them. Only that directory is mounted (its symlinks resolved here, as `prepare` checked it). A spec that
    already mounts that path is left as it is."""
    index = mc.spec.flux_runner_index
    runner = mc.spec.containers[index]
    if any(v.path == str(workdir) for v in runner.volumes.values()):
        return mc
    volume = ContainerVolume(path=str(workdir), host_path=os.path.realpath(workdir))
    runner = runner.model_copy(update={"volumes": {**runner.volumes, WORKDIR_VOLUME: volume}})
    containers = [*mc.spec.containers[:index], runner, *mc.spec.containers[index + 1 :]]
    return mc.model_copy(update={"spec": mc.spec.model_copy(update={"containers": containers})})


def script_env() -> dict[str, str]:
    """What a batch script exports for its members: OpenFOAM's variables and the MPI settings."""
    return {**foam_variables(), **MPI_SETTINGS}


def live_fields(runner: CampaignRunner) -> LiveFields:
    """What status shows while the campaign runs."""
    return {
        "running": True,
        "t": round(runner.now(), 1),
        "size": runner.last_view.size if runner.last_view else None,
        "requested_m": runner._last_requested,
        "cpu_seconds_requested": round(runner.cpu_seconds, 1),
        "resizes": runner.resizes,
        "scale_events": runner.scale_events,
        "ensembles": [
            {
                "ensemble": e.name,
                "state": e.state,
                "pods": list(e.pods),
                "members": [
                    {
                        "member": m.name,
                        "state": m.state,
                        "iterations": m.iterations,
                        "mean_duty": round(sum(m.duty) / len(m.duty), 4) if m.duty else None,
                    }
                    for m in e.members
                ],
            }
            for e in runner.views
        ],
    }


def report(plan: CampaignPlan, title: str) -> Report:
    """Results from the files (tables and both PNGs in the work directory); the summary for the state file."""
    events_path = plan.workdir / "events.jsonl"
    raw = list(read_events(events_path)) if events_path.exists() else []
    events = cast("list[CampaignEvent]", raw)  # the log as the runner wrote it
    members = member_results(plan, events)
    ensembles = ensemble_results(plan, events, members)
    files = write_tables(plan.workdir, members, ensembles)
    polar = plan.workdir / "polar.png"
    if any(m.cl is not None for m in members):
        files.append(plot_polar(members, polar, f"{title}: force coefficients"))
    if any(e.get("kind") == "sample" for e in events):
        files.append(plot_campaign_timeline(raw, plan.workdir / "timeline.png", f"{title}: timeline"))
    totals = cluster_totals(events)
    return {
        "members": [cast(MemberRow, asdict(m)) for m in members],
        "ensemble_rows": [cast(EnsembleRow, asdict(e)) for e in ensembles],
        "unused_scaled_pods": unused_scaled_pods(events),
        "files": [str(f) for f in files],
        "cpu_seconds_requested": totals["cpu_seconds_requested"],
        "resizes": totals["resizes"],
        "scale_events": totals["scale_events"],
    }


def run(
    backend: Any, mc: MiniCluster, plan: CampaignPlan, say: Callable[[str], None], timeout: float | None
) -> tuple[str, CampaignRunner]:
    """Run the campaign on the cluster that is up; the state file follows it."""
    from miniclusters.autoscaling.queue import local_flux

    loops = loops_of(mc)
    events = plan.workdir / "events.jsonl"
    common: CampaignState = {
        "workdir": str(plan.workdir),
        "events": str(events),
        "campaign": _spec_json(mc.spec.campaign),
        "loops": {"autoscale": loops.autoscale is not None, "multiplex": loops.multiplex is not None},
    }
    mirror = _lead_copy(backend, mc.name)
    lead_uri = getattr(backend, "lead_uri", None)  # the local backend's lead socket on this machine
    uri = lead_uri(mc.name) if lead_uri is not None else None  # None: not our broker's (the flux flavour)
    flux, jobs_of = (local_flux(), None) if uri is not None else (["flux"], exec_jobs(backend, mc.name, ["flux"]))
    with Tee(events, mirror) as stream, EventLog(stream, "campaign", time.monotonic) as log:
        runner = CampaignRunner(backend, mc.name, plan, loops, log, flux, uri or "", say=say, jobs_of=jobs_of)
        runner.script_env = script_env()
        last = [0.0]

        def tick(r: CampaignRunner) -> None:
            if time.monotonic() - last[0] >= 2.0:
                last[0] = time.monotonic()
                with contextlib.suppress(OSError):
                    save_state(mc.name, {**common, **live_fields(r)})

        runner.on_tick = tick
        try:
            outcome = runner.run(timeout)
        except KeyboardInterrupt:
            save_state(mc.name, {**common, **live_fields(runner), "running": False, "outcome": "cancelled"})
            raise
    summary = report(plan, mc.name)
    save_state(mc.name, {**common, **summary, **live_fields(runner), "running": False, "outcome": outcome})
    return outcome, runner


def _lead_copy(backend: Any, name: str) -> Path | None:
    """`<lead REST state dir>/controllers/campaign.jsonl` when the lead's REST state directory is on this machine
    (the local backend's pods, where /cluster looks), else None. A podman lead keeps its state in its container:
    the local layout made here for it was left behind by `down` (`<state>/<name>/pods/0/run/state/restful`)."""
    lead_rest_state_dir = getattr(getattr(backend, "store", None), "lead_rest_state_dir", None)
    if lead_rest_state_dir is None:
        return None
    return Path(lead_rest_state_dir(name)) / "controllers" / "campaign.jsonl"


def _spec_json(spec: CampaignSpec | None) -> CampaignJson:
    """spec.campaign's wire form, for the state file (CampaignSpec validates it when read back)."""
    return cast(CampaignJson, spec.model_dump(by_alias=True)) if spec is not None else {}


def plan_from_state(state: CampaignState) -> CampaignPlan:
    spec = CampaignSpec.model_validate(state["campaign"])
    return plan_campaign(spec, Path(state["workdir"]))
