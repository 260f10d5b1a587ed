"""A campaign's results, rebuilt from what it left on disk: the members' files and the controller's event log.

Science: each member's final Cl and Cd (forceCoeffs) against its swept value. Operations: per ensemble and member
the state, makespan, mean duty cycle, CPU requested over time, resizes and restarts. Both are computed from files
only, so `minicluster campaign results` gives the same answer during, after, and long after the run.
"""

from __future__ import annotations

import csv
import itertools
import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TypedDict

from elasticity.control.ports import ResizeOutcome
from elasticity.workloads.foam import FoamError, log_tail
from elasticity.workloads.naca_sweep import final_coefficients
from miniclusters.campaign.observe import last_time_step, read_stamp
from miniclusters.campaign.plan import ENDED, SOLVER, SUBMITTED, CampaignPlan, Member
from miniclusters.campaign.state_file import ClusterTotals

PodTable = dict[str | int, int]
"""pod -> a value (millicores, restarts): text keys as read back from JSON, int keys as the runner wrote them."""


class CampaignEvent(TypedDict, total=False):
    """A line of the campaign's events.jsonl as read back: `kind`, `t`, and the fields of that kind."""

    kind: str
    t: float
    ensemble: str
    member: str
    state: str
    duty: list[float]
    pods: PodTable | list[int]
    """A sample's requests by pod; the pods an ensemble or member ran on."""
    pod_restarts: PodTable
    requested_m: int
    allocatable_m: int
    pending: int
    running: int
    restarts: int
    """A sample's every pod's restarts together (what the report read before pod_restarts)."""
    previous: int
    size: int
    pod: int
    outcome: str
    cpu_requested: int
    """A resize's: the CPU request asked of the pod, in millicores."""
    job_run: float
    job_end: float


@dataclass(frozen=True)
class MemberResult:
    ensemble: str
    member: str
    parameter: str
    value: float
    state: str
    cl: float | None
    cd: float | None
    iterations: int | None
    makespan: float | None
    mean_duty: float | None
    reason: str = ""


@dataclass(frozen=True)
class EnsembleResult:
    ensemble: str
    state: str
    members: int
    members_ok: int
    pods: list[int]
    makespan: float | None
    mean_duty: float | None
    cpu_requested_mean_m: float | None
    cpu_requested_peak_m: int | None
    resizes: int
    restarts: int


def _duties(events: Sequence[CampaignEvent]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for e in events:
        if e.get("kind") == "member" and e.get("duty"):
            out[str(e["member"])] = [float(d) for d in e["duty"]]
    return out


def _cancelled(events: Sequence[CampaignEvent]) -> set[str]:
    return {str(e["ensemble"]) for e in events if e.get("kind") == "ensemble-cancelled"}


def _ended(events: Sequence[CampaignEvent]) -> set[str]:
    return {str(e["ensemble"]) for e in events if e.get("kind") == "ensemble-done"}


def member_result(
    member: Member, duty: Sequence[float] | None, cancelled: bool, orphaned: bool = False
) -> MemberResult:
    """done: the job exited 0 and forceCoeffs wrote coefficients; failed: why, in the solver's words (or, when
    `orphaned`, because its sub-instance ended first: a lost node); never left "running" once its ensemble ended."""
    submitted = read_stamp(member.directory / SUBMITTED)
    ended = read_stamp(member.directory / ENDED)
    log = member.directory / f"log.{SOLVER}"
    try:
        iterations = last_time_step(log.read_text(errors="replace"))
    except OSError:
        iterations = None
    cl = cd = None
    reason = ""
    if ended is None and orphaned and not cancelled:
        state = "failed"
        reason = "its ensemble's sub-instance ended before it did (a lost pod?)" + (
            "" if submitted else "; it was never submitted"
        )
    elif ended is None:
        state = "cancelled" if cancelled else ("running" if submitted else "pending")
    elif ended.word == "0":
        try:
            coefficients = final_coefficients(member.directory)
            cl, cd, state = coefficients.cl, coefficients.cd, "done"
        except FoamError as exc:
            state, reason = "failed", str(exc)
    else:
        state = "cancelled" if cancelled else "failed"
        tail = log_tail(member.directory / "error.txt", 3) or log_tail(log, 3)
        reason = f"exit {ended.word}" + (f": {' | '.join(tail.splitlines())}" if tail else "")
    makespan = round(ended.at - submitted.at, 2) if ended and submitted else None
    mean = round(sum(duty) / len(duty), 4) if duty else None
    return MemberResult(
        member.ensemble, member.name, member.parameter, member.value, state, cl, cd, iterations, makespan, mean, reason
    )


def member_results(plan: CampaignPlan, events: Sequence[CampaignEvent]) -> list[MemberResult]:
    duties, cancelled, ended = _duties(events), _cancelled(events), _ended(events)
    return [member_result(m, duties.get(m.name), m.ensemble in cancelled, m.ensemble in ended) for m in plan.members]


def _by_pod(table: PodTable | list[int] | None, pod: int) -> int | None:
    """A per-pod value of a sample (JSON keys are text), None when the sample does not have it."""
    if not isinstance(table, dict):
        return None
    value = table.get(str(pod), table.get(pod))
    return int(value) if value is not None else None


def pod_restarts(window: Sequence[CampaignEvent], pods: Sequence[int]) -> int:
    """Restarts of these pods over the samples: each pod's own count as it rises. Another pod's restart, or a pod
    removed (or played again by a scale-up, from 0), changes nothing here."""
    total = 0
    for pod in pods:
        seen = [n for n in (_by_pod(s.get("pod_restarts"), pod) for s in window) if n is not None]
        total += sum(max(0, after - before) for before, after in itertools.pairwise(seen))
    return total


def unused_scaled_pods(events: Sequence[CampaignEvent]) -> list[int]:
    """Pods a scale-up added that no ensemble ran on (nor any member's rank): on podman a pod takes seconds to
    play and join, and the ensemble it was grown for may start on a pod that freed up first."""
    added = {i for e in events if e.get("kind") == "scaled" for i in range(int(e["previous"]), int(e["size"]))}
    used = {int(p) for e in events if e.get("kind") in ("ensemble-running", "member") for p in e.get("pods") or ()}
    return sorted(added - used)


REFUSED = (ResizeOutcome.DEFERRED.value, ResizeOutcome.INFEASIBLE.value)
"""Resize outcomes the node did not take (the runner counts the others)."""


def cluster_totals(events: Sequence[CampaignEvent]) -> ClusterTotals:
    """The runner's cluster figures read back from its event log, for a reader that did not run it (`up` following
    the operator's campaign): CPU-seconds requested (integrated over the samples), resizes the node took, scales."""
    samples = [e for e in events if e.get("kind") == "sample"]
    cpu_seconds = sum(
        float(a["requested_m"]) / 1000.0 * max(0.0, float(b["t"]) - float(a["t"]))
        for a, b in itertools.pairwise(samples)
    )
    return {
        "cpu_seconds_requested": round(cpu_seconds, 1),
        "resizes": sum(1 for e in events if e.get("kind") == "resize" and e.get("outcome") not in REFUSED),
        "scale_events": sum(1 for e in events if e.get("kind") == "scaled"),
    }


def _makespan(start: CampaignEvent | None, end: CampaignEvent | None) -> float | None:
    """From the lead's record of the batch job (its start to its end, the clock the members' stamps use); from
    the controller's looks only for a log without them."""
    if start is None or end is None:
        return None
    if start.get("job_run") and end.get("job_end"):
        return round(float(end["job_end"]) - float(start["job_run"]), 2)
    return round(float(end["t"]) - float(start["t"]), 2)


def ensemble_results(
    plan: CampaignPlan, events: Sequence[CampaignEvent], members: Sequence[MemberResult]
) -> list[EnsembleResult]:
    """Per ensemble: its run (start/end events), pods, and the samples and resizes of those pods meanwhile."""
    rows = []
    samples = [e for e in events if e.get("kind") == "sample"]
    for ensemble in plan.ensembles:
        mine = [m for m in members if m.ensemble == ensemble.name]
        starts = [e for e in events if e.get("kind") == "ensemble-running" and e.get("ensemble") == ensemble.name]
        start = starts[0] if starts else None
        ends = [
            e
            for e in events
            if e.get("kind") in ("ensemble-done", "ensemble-cancelled") and e.get("ensemble") == ensemble.name
        ]
        end = ends[-1] if ends else None  # the last: a rerun of lost members ends later
        pods = list(dict.fromkeys(int(p) for e in starts for p in e.get("pods", [])))  # a rerun may move
        t0 = float(start["t"]) if start else None
        t1 = float(end["t"]) if end else None
        window = [s for s in samples if t0 is not None and t0 <= float(s["t"]) <= (t1 if t1 is not None else 1e18)]
        per_sample = [sum(_by_pod(s.get("pods"), p) or 0 for p in pods) for s in window]
        resizes = sum(
            1
            for e in events
            if e.get("kind") == "resize"
            and e.get("pod") in pods
            and t0 is not None
            and t0 <= float(e["t"]) <= (t1 if t1 is not None else 1e18)
            and e.get("outcome") != "deferred"
        )
        duties = [m.mean_duty for m in mine if m.mean_duty is not None]
        state = (
            "cancelled"
            if end and end.get("kind") == "ensemble-cancelled"
            else ("done" if end else "running" if start else "queued")
        )
        rows.append(
            EnsembleResult(
                ensemble.name,
                state,
                len(mine),
                sum(1 for m in mine if m.state == "done"),
                pods,
                _makespan(start, end),
                round(sum(duties) / len(duties), 4) if duties else None,
                round(sum(per_sample) / len(per_sample), 1) if per_sample else None,
                max(per_sample) if per_sample else None,
                resizes,
                pod_restarts(window, pods),
            )
        )
    return rows


def write_tables(folder: Path, members: Iterable[MemberResult], ensembles: Iterable[EnsembleResult]) -> list[Path]:
    """results.csv (the science), report.json (everything)."""
    members, ensembles = list(members), list(ensembles)
    csv_path = folder / "results.csv"
    with csv_path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(
            [
                "ensemble",
                "member",
                "parameter",
                "value",
                "state",
                "Cl",
                "Cd",
                "iterations",
                "makespan_s",
                "mean_duty",
                "reason",
            ]
        )
        for m in members:
            writer.writerow(
                [
                    m.ensemble,
                    m.member,
                    m.parameter,
                    m.value,
                    m.state,
                    m.cl,
                    m.cd,
                    m.iterations,
                    m.makespan,
                    m.mean_duty,
                    m.reason,
                ]
            )
    json_path = folder / "report.json"
    json_path.write_text(
        json.dumps({"members": [asdict(m) for m in members], "ensembles": [asdict(e) for e in ensembles]}, indent=2)
    )
    return [csv_path, json_path]
