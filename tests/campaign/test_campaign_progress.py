"""What a campaign records to outlive its runner (campaign/progress.py) and what a resumed runner reads back: the
jobs it adopts from the lead, and the event log a killed writer left half-written."""

from __future__ import annotations

from pathlib import Path
from typing import cast

from elasticity.control.events import EventLog, read_events
from miniclusters.api.status import StatusJson
from miniclusters.campaign.progress import CampaignProgress, adopt
from miniclusters.campaign.runner import replayed_states

ENSEMBLES = ("alpha", "mach", "beta")


def test_adopt_keeps_records_and_takes_only_newer_jobs_submitted_since_the_campaign_began() -> None:
    progress = CampaignProgress("f", {"alpha": 10}, started=1000.0, cancelled=("beta",))
    lead = {
        5: ("mach", 900.0),  # an earlier campaign's mach, on the same cluster: not ours
        10: ("alpha", 1001.0),
        12: ("mach", 1002.0),  # submitted, then the runner died before recording it
        13: ("beta", 1003.0),  # given up: never adopted
        14: ("other", 1004.0),
    }
    assert adopt(progress, ENSEMBLES, lead) == {"alpha": 10, "mach": 12}
    lead[20] = ("alpha", 1010.0)  # alpha's rerun, not recorded either
    assert adopt(progress, ENSEMBLES, lead) == {"alpha": 20, "mach": 12}
    assert adopt(progress, ENSEMBLES, {}) == {"alpha": 10}


def test_replayed_states_are_each_ensemble_s_and_member_s_last(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    with EventLog(path, "campaign", lambda: 0.0) as log:
        log.write("ensemble-queued", ensemble="alpha")
        log.write("ensemble-running", ensemble="alpha", pods=[0])
        log.write("member", ensemble="alpha", member="alpha-0", state="running")
        log.write("member", ensemble="alpha", member="alpha-0", state="running", duty=[0.2, 0.3])
        log.write("member", ensemble="alpha", member="alpha-1", state="done")
        log.write("ensemble-done", ensemble="alpha")
        log.write("ensemble-rerun", ensemble="alpha", members=["alpha-2"])
    assert replayed_states(path) == {
        "alpha": "queued",
        "alpha/alpha-0": "running+profiled",
        "alpha/alpha-1": "done",
    }
    assert replayed_states(tmp_path / "missing.jsonl") == {} and replayed_states(None) == {}


def test_a_log_reopened_after_a_writer_died_mid_line_keeps_every_later_record(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    with EventLog(path, "campaign", lambda: 0.0) as log:
        log.write("submitted", ensemble="alpha")
    with path.open("a") as torn:
        torn.write('{"kind": "member", "ensem')  # killed here
    with EventLog(path, "campaign", lambda: 1.0) as log:
        log.write("campaign-resume", jobs={})
    kinds = [e["kind"] for e in read_events(path)]
    assert kinds == ["submitted", "campaign-resume"]


def test_a_multiplexing_run_s_record_round_trips_and_adopts_only_this_run_s_unrecorded_jobs() -> None:
    from miniclusters.api.extension_specs import MultiplexingSpec
    from miniclusters.operator.multiplex_progress import MultiplexProgress, RunRecord
    from miniclusters.operator.multiplex_progress import adopt as adopt_run

    spec = MultiplexingSpec.model_validate({"enabled": True, "command": "proxy_solver", "max": 2})
    from miniclusters.api.fingerprint import fingerprint

    record = RunRecord("/data/multiplex/run-1", {"sim1": "ƒA"}, {})
    progress = MultiplexProgress(fingerprint(spec), record, started=1000.0)
    back = MultiplexProgress.from_status({"multiplexing": progress.to_status()})
    assert back == progress and back.belongs_to(spec)
    assert not back.belongs_to(spec.model_copy(update={"max": 3}))
    no_run = cast(StatusJson, {"multiplexing": {"spec": "x"}})  # malformed on purpose: no run
    assert MultiplexProgress.from_status(no_run) is None  # nothing to go on with
    lead = {
        "ƒA": ("sim1", 1001.0),
        "ƒB": ("sim2", 1002.0),  # submitted, not recorded
        "ƒC": ("sim1", 1003.0),  # sim1's resubmission, not recorded
        "ƒZ": ("sim3", 900.0),  # an earlier run's
        "ƒY": ("lammps", 1004.0),  # a user's job
    }
    adopted = adopt_run(record, 1000.0, lead)
    assert adopted.jobs == {"sim1": "ƒC", "sim2": "ƒB"} and adopted.attempts == {"sim1": 2, "sim2": 1}
