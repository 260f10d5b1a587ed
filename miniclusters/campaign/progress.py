"""What a campaign has done that must outlive the process running it: which Flux job runs each ensemble, how often
its lost members were rerun, which ensembles were given up, and how the campaign ended.

The operator records it in the MiniCluster's ``status.campaign`` after every step that changed it, so an
operator that takes over (another replica, or the same one restarted) resumes the campaign where it was: it
submits nothing twice and starts nothing that ended. Pure: the runner produces it, the status holds it, the
starter reads it back; the spec's fingerprint says whether a record belongs to the campaign the spec asks for.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from broker.jobs.jobid import encode_f58, parse_jobid
from miniclusters.api.campaign import CampaignSpec
from miniclusters.api.fingerprint import fingerprint
from miniclusters.api.status import CampaignStatusJson, StatusJson

Outcome = Literal["done", "cancelled"]


@dataclass(frozen=True)
class CampaignProgress:
    spec: str
    """api.fingerprint of the spec this record belongs to."""
    jobs: Mapping[str, int] = field(default_factory=dict)
    """Ensemble -> the Flux job (on the lead) running it now, its last rerun's when it was rerun."""
    reruns: Mapping[str, int] = field(default_factory=dict)
    cancelled: tuple[str, ...] = ()
    started: float = 0.0
    """Wall-clock seconds when the campaign began: a resumed runner keeps the campaign's clock."""
    outcome: Outcome | None = None

    def to_status(self) -> CampaignStatusJson:
        """``status.campaign`` (job ids as Flux prints them)."""
        out: CampaignStatusJson = {
            "spec": self.spec,
            "jobs": {name: encode_f58(job) for name, job in sorted(self.jobs.items())},
            "reruns": dict(sorted(self.reruns.items())),
            "cancelled": sorted(self.cancelled),
            "started": round(self.started, 3),
        }
        if self.outcome is not None:
            out["outcome"] = self.outcome
        return out

    @classmethod
    def from_status(cls, status: StatusJson | None) -> CampaignProgress | None:
        """The record in a MiniCluster's status, or None when there is none or it cannot be read (a record we
        cannot read is not resumed from: the campaign starts over rather than guessing)."""
        data = (status or {}).get("campaign")
        if not isinstance(data, Mapping) or not isinstance(data.get("spec"), str):
            return None
        try:
            jobs = {str(k): parse_jobid(str(v)) for k, v in (data.get("jobs") or {}).items()}
            reruns = {str(k): int(v) for k, v in (data.get("reruns") or {}).items()}
            cancelled = tuple(str(n) for n in data.get("cancelled") or ())
            started = float(data.get("started") or 0.0)
        except (TypeError, ValueError, AttributeError):
            return None
        outcome = data.get("outcome")
        return cls(
            data["spec"], jobs, reruns, cancelled, started, outcome if outcome in ("done", "cancelled") else None
        )

    def belongs_to(self, spec: CampaignSpec) -> bool:
        return self.spec == fingerprint(spec)


def adopt(
    progress: CampaignProgress, ensembles: tuple[str, ...], lead: Mapping[int, tuple[str, float]]
) -> dict[str, int]:
    """The job of each ensemble: the recorded one, or a newer job on the lead named after the ensemble and
    submitted since the campaign began (it was submitted, then the runner died before the record was written).
    ``lead``: job id -> (job name, submit time), every job the lead knows."""
    jobs = dict(progress.jobs)
    for name in ensembles:
        if name in progress.cancelled:
            continue
        found = [job for job, (job_name, t) in lead.items() if job_name == name and t >= progress.started - 1.0]
        newer = [job for job in found if job > jobs.get(name, -1)]
        if newer:
            jobs[name] = max(newer)
    return jobs
