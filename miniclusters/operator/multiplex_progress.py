"""What a multiplexing run has done that must outlive the operator running it: the run's directory in the lead pod,
the Flux job of each simulation and how often it was submitted, and how the run ended.

The operator records it in the MiniCluster's ``status.multiplexing`` after every step that changed it, so the
operator that takes over (another replica, or the same one restarted) goes on with the same run: it submits no
simulation again, reads the traces and progress of the ones running where they are, and starts only what the
run still lacks. Pure, as campaign/progress.py (here, below the multiplex package, because the operator reads it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from miniclusters.api.extension_specs import MultiplexingSpec
from miniclusters.api.fingerprint import fingerprint
from miniclusters.api.status import MultiplexingStatusJson, StatusJson

Outcome = Literal["done", "cancelled"]


@dataclass(frozen=True)
class RunRecord:
    """The simulations port's part: where the run writes, and what it submitted."""

    run: str
    """The run's directory (`<workdir>/run-<UTC time>`): its simulations' traces and progress lines."""
    jobs: Mapping[str, str] = field(default_factory=dict)
    """Simulation -> its Flux job, as `flux submit` printed it."""
    attempts: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class MultiplexProgress:
    spec: str
    """api.fingerprint of the spec.multiplexing this record belongs to."""
    record: RunRecord
    started: float = 0.0
    """Wall-clock seconds when the run began."""
    outcome: Outcome | None = None

    def to_status(self) -> MultiplexingStatusJson:
        out: MultiplexingStatusJson = {
            "spec": self.spec,
            "run": self.record.run,
            "jobs": dict(sorted(self.record.jobs.items())),
            "attempts": dict(sorted(self.record.attempts.items())),
            "started": round(self.started, 3),
        }
        if self.outcome is not None:
            out["outcome"] = self.outcome
        return out

    @classmethod
    def from_status(cls, status: StatusJson | None) -> MultiplexProgress | None:
        """The record in a MiniCluster's status; None when there is none or it cannot be read (then the run
        starts over rather than guessing)."""
        data = (status or {}).get("multiplexing")
        if not isinstance(data, Mapping) or not isinstance(data.get("spec"), str) or not data.get("run"):
            return None
        try:
            jobs = {str(k): str(v) for k, v in (data.get("jobs") or {}).items()}
            attempts = {str(k): int(v) for k, v in (data.get("attempts") or {}).items()}
            started = float(data.get("started") or 0.0)
        except (TypeError, ValueError, AttributeError):
            return None
        outcome = data.get("outcome")
        return cls(
            data["spec"],
            RunRecord(str(data["run"]), jobs, attempts),
            started,
            outcome if outcome in ("done", "cancelled") else None,
        )

    def belongs_to(self, spec: MultiplexingSpec) -> bool:
        return self.spec == fingerprint(spec)


def adopt(record: RunRecord, started: float, lead: Mapping[str, tuple[str, float]]) -> RunRecord:
    """The record with the simulations the lead ran for this run but the record does not name (submitted, then
    the operator died before it wrote the record): by job name, submitted since the run began. ``lead``: job id
    (as printed) -> (job name, submit time)."""
    jobs, attempts = dict(record.jobs), dict(record.attempts)
    known = set(jobs.values())
    for job, (name, t_submit) in sorted(lead.items(), key=lambda item: item[1][1]):
        if job in known or not name.startswith("sim") or not name[3:].isdigit() or t_submit < started - 1.0:
            continue
        if name in jobs:  # its resubmission after a failure
            attempts[name] = attempts.get(name, 1) + 1
        jobs[name] = job
        attempts.setdefault(name, 1)
    return RunRecord(record.run, jobs, attempts)
