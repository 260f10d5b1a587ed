"""What the campaign controller sees: ensembles from the lead's job list, members from the files they write.

A member's directory holds everything about it (`submitted`, `ended` from the batch script, the solver log, the
PMPI traces), so its fate is known even after its sub-instance has ended. The traces give each rank's duty cycle
and, from their hostnames, its pod.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import hostlist

from broker.errors import FluxError
from broker.jobs.api import JobClient, JobInfo
from common import idset
from elasticity.control.campaign import EnsembleState, EnsembleView, MemberState, MemberView
from miniclusters.backends.base import Backend, BackendError
from miniclusters.campaign.plan import BOUNDARY, ENDED, SOLVER, SUBMITTED, CampaignPlan, Ensemble, Member
from miniclusters.trace_profiles import read_job_profile

_TIME = re.compile(r"^Time = (\d+)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class Stamp:
    """A line the batch script wrote: a word (job id or exit code) and the time."""

    word: str
    at: float


def read_stamp(path: Path) -> Stamp | None:
    try:
        words = path.read_text().split()
    except OSError:
        return None
    if len(words) < 2:
        return None
    try:
        return Stamp(words[0], float(words[1]))
    except ValueError:
        return None


def last_time_step(text: str) -> int | None:
    found = _TIME.findall(text)
    return int(found[-1]) if found else None


@dataclass
class Profiles:
    """Member -> (duty per rank, pod per rank), read once all its ranks wrote their traces."""

    ranks: int
    pod_of_host: Mapping[str, int]
    found: dict[str, tuple[tuple[float, ...], tuple[int, ...]]] = field(default_factory=dict)

    def of(self, member: Member) -> tuple[tuple[float, ...], tuple[int, ...]] | None:
        if member.name in self.found:
            return self.found[member.name]
        profile = read_job_profile(
            member.directory / "pmpi", self.ranks, BOUNDARY, allocation_millicores=1000.0, pod_of_host=self.pod_of_host
        )
        if profile is None:
            return None
        self.found[member.name] = (profile.duty, profile.pods)
        return self.found[member.name]


def member_view(member: Member, profiles: Profiles, cancelled: bool, orphaned: bool = False) -> MemberView:
    """`orphaned`: its ensemble's sub-instance has ended, so a member without an end record will never get one."""
    submitted = read_stamp(member.directory / SUBMITTED)
    ended = read_stamp(member.directory / ENDED)
    try:
        iterations = last_time_step((member.directory / f"log.{SOLVER}").read_text(errors="replace"))
    except OSError:
        iterations = None
    state: MemberState
    if ended is not None:
        state = "done" if ended.word == "0" else ("cancelled" if cancelled else "failed")
    elif cancelled:
        state = "cancelled"
    elif orphaned:
        state = "failed"
    elif submitted is not None:
        state = "running"
    else:
        state = "pending"
    profile = profiles.of(member) if submitted is not None else None
    duty, pods = profile if profile is not None else (None, None)
    return MemberView(member.name, state, iterations, duty, pods)


def ensemble_state(info: JobInfo | None, cancelled: bool) -> EnsembleState:
    if info is None:
        return "cancelled" if cancelled else "queued"
    if info.state == "INACTIVE":
        return "cancelled" if info.result in ("CANCELED", "CANCELLED") or cancelled else "done"
    if info.state in ("RUN", "CLEANUP"):
        return "running"
    return "queued"


def job_times(info: JobInfo | None) -> dict[str, float]:
    """When the lead says a batch job started and ended (wall clock, as the members' stamps): `job_run`,
    `job_end` (its cleanup began: the script had exited), each only once known. An ensemble's makespan comes
    from these, not from when the controller happened to look (on podman a look every few seconds)."""
    times = {}
    if info is not None and info.t_run > 0:
        times["job_run"] = info.t_run
    end = (info.t_cleanup or info.t_inactive) if info is not None else 0.0
    if end > 0:
        times["job_end"] = end
    return times


def ran_on(info: JobInfo | None) -> tuple[int, ...]:
    """The pods (ranks) a job ran on, as the lead recorded them, also once it ended."""
    return tuple(idset.decode(info.ranks)) if info is not None and info.ranks else ()


def ensemble_view(ensemble: Ensemble, info: JobInfo | None, profiles: Profiles, cancelled: bool) -> EnsembleView:
    state = ensemble_state(info, cancelled)
    pods = tuple(idset.decode(info.ranks)) if info is not None and info.ranks and state == "running" else ()
    gone = cancelled or state in ("cancelled",)
    members = tuple(member_view(m, profiles, gone, state == "done") for m in ensemble.members)
    return EnsembleView(ensemble.name, state, pods, members)


def lead_jobs(uri: str) -> dict[int, JobInfo] | None:
    """Every job of the lead by id; None when the lead does not answer this time."""
    try:
        with JobClient(uri) as client:
            return {info.id: info for info in client.jobs("all")}
    except (FluxError, OSError):
        return None


def exec_jobs(backend: Backend, name: str, flux: list[str]) -> Callable[[], dict[int, JobInfo] | None]:
    """`flux jobs -a --json` in the lead pod: every job by id, its ranks from the pods named in its nodelist."""

    def jobs() -> dict[int, JobInfo] | None:
        try:
            result = backend.exec(name, 0, [*flux, "jobs", "-a", "--json"])
            if result.rc != 0:
                return None
            records = json.loads(result.stdout)["jobs"]
            out = {}
            for record in records:
                info = JobInfo.from_dict(record)
                if not info.ranks and info.nodelist:
                    ranks = [_pod_index(name, host) for host in hostlist.expand_hostlist(info.nodelist)]
                    info = info._replace(ranks=",".join(str(r) for r in sorted(r for r in ranks if r is not None)))
                out[info.id] = info
            return out
        except (BackendError, ValueError, KeyError, TypeError):
            return None  # a lead that does not answer, or half a line: next tick

    return jobs


def _pod_index(cluster: str, host: str) -> int | None:
    prefix = f"{cluster}-"
    tail = host.split(".", 1)[0][len(prefix) :] if host.startswith(prefix) else ""
    return int(tail) if tail.isdigit() else None


def observe_ensembles(
    plan: CampaignPlan,
    jobs: Mapping[str, int],
    infos: Mapping[int, JobInfo],
    profiles: Profiles,
    cancelled: frozenset[str],
) -> tuple[EnsembleView, ...]:
    """Every ensemble: `jobs` maps an ensemble to its batch job id (absent: not submitted yet)."""
    views = []
    for ensemble in plan.ensembles:
        job = jobs.get(ensemble.name)
        info = infos.get(job) if job is not None else None
        views.append(ensemble_view(ensemble, info, profiles, ensemble.name in cancelled))
    return tuple(views)
