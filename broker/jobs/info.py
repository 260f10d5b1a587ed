"""A job's public view (what `flux jobs` and the Flux RESTful API report), built from its JobRecord."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from broker.jobs.jobid import encode_f58
from broker.jobs.record import JobRecord
from broker.jobs.states import JobState

if TYPE_CHECKING:
    from broker.jobs.shapes import Annotations, JobInfoRecord, Jobspec


def job_owner(jobspec: object) -> str:
    """The REST user recorded in the jobspec at submit (attributes.system.miniclusters.owner), "" if none.

    Kept in the jobspec so it survives the journal, save/restore and flux-core's KVS alike. Read leniently from
    any JSON: a flux-core jobspec comes from its KVS unchecked."""
    attributes = jobspec.get("attributes", {}) if isinstance(jobspec, dict) else {}
    system = attributes.get("system", {}) if isinstance(attributes, dict) else {}
    ours = system.get("miniclusters") if isinstance(system, dict) else None
    owner = ours.get("owner") if isinstance(ours, dict) else None
    return owner if isinstance(owner, str) else ""


def owned_by(owner: str, userid: int, name: str, uid: int) -> bool:
    """The multi-user access rule (broker/rest/access.py says who is subject to it): a job with a recorded owner
    is that REST user's; one without belongs to the account whose uid submitted it (`uid` -1: the user has none
    that counts). The broker applies it to a listing, the REST server to everything else: one rule."""
    return owner == name if owner else uid >= 0 and userid == uid


def request_shape(jobspec: Jobspec) -> tuple[int, int | None, int]:
    """(ntasks, nnodes or None, cores per task) straight from a jobspec, without full validation."""
    from broker.jobs.jobspec import JobspecError, parse_jobspec

    try:
        spec = parse_jobspec(jobspec)
    except JobspecError:
        return 1, None, 1
    return spec.resources.ntasks, spec.resources.nnodes, spec.resources.cores_per_task


def resource_summary(cores: dict[int, list[int]]) -> str:
    """What Flux's scheduler annotates a job with: "rank[0-1]/core[0-1]" (ranks with the same cores grouped)."""
    from common import idset

    groups: dict[tuple[int, ...], list[int]] = {}
    for rank in sorted(cores):
        groups.setdefault(tuple(sorted(cores[rank])), []).append(rank)

    def brackets(ids: list[int]) -> str:
        text = idset.encode(ids)
        return text if len(ids) == 1 else f"[{text}]"

    return ",".join(f"rank{brackets(ranks)}/core{brackets(list(c))}" for c, ranks in groups.items() if c)


def _annotations(record: JobRecord) -> Annotations:
    annotations = record.extra.copy()
    sched = annotations.get("sched")
    if record.cores and not (isinstance(sched, dict) and "resource_summary" in sched):
        # merged: a pending reason set earlier (sched.reason_pending, e.g. by the burst service) stays beside it
        annotations["sched"] = {
            **(sched if isinstance(sched, dict) else {}),
            "resource_summary": resource_summary(record.cores),
        }
    return annotations


def _requested_nodes(record: JobRecord, known: int | None) -> int | None:
    return known if known is not None else request_shape(record.jobspec)[1]


def job_info(
    record: JobRecord, nodelist: str, ntasks: int, now: float | None = None, requested_nodes: int | None = None
) -> JobInfoRecord:
    """The fields the Flux RESTful API returns for a job, plus Flux's own names for the same things.

    `requested_nodes`: the node count its jobspec asks for (None: none asked), when the caller already parsed
    the jobspec (the job manager keeps each parsed); otherwise it is read here, a full parse per job."""
    now = time.time() if now is None else now
    state = record.state
    if record.t_run and state in (JobState.RUN, JobState.CLEANUP):
        runtime = now - record.t_run if state == JobState.RUN else record.t_cleanup - record.t_run
    elif record.t_run and record.t_cleanup:
        runtime = record.t_cleanup - record.t_run
    else:
        runtime = 0.0
    system = record.jobspec.get("attributes", {}).get("system", {})
    name = system.get("job", {}).get("name") if isinstance(system.get("job"), dict) else None
    if not name:
        command = record.jobspec.get("tasks", [{}])[0].get("command", ["?"])
        name = str(command[0]).rsplit("/", 1)[-1] if command else "?"
    exception = record.exception or {}
    limit = float(system.get("duration", 0) or 0)
    return {
        "id": record.jobid,
        "id_f58": encode_f58(record.jobid),
        "state": str(state.name),
        "result": record.result.value if record.result is not None else "",
        "returncode": record.returncode,
        "waitstatus": record.waitstatus,
        "success": record.result is not None and record.result.value == "COMPLETED",
        # before it runs, the node count it asked for (as Flux's job-list reads it from the jobspec)
        "nnodes": len(record.ranks) if record.ranks else (_requested_nodes(record, requested_nodes) or 0),
        "ntasks": ntasks,
        "ranks": list(record.ranks),
        "nodelist": nodelist,
        "runtime": round(max(runtime, 0.0), 6),
        "exception": {
            "occurred": bool(exception),
            "type": exception.get("type", ""),
            "note": exception.get("note", ""),
            "severity": exception.get("severity", -1) if exception else -1,
        },
        "name": name,
        "userid": record.userid,
        "urgency": record.urgency,
        "priority": record.priority,
        "t_submit": record.t_submit,
        "t_depend": record.t_depend,
        "t_priority": record.t_priority,
        "t_sched": record.t_sched,
        "t_run": record.t_run,
        "t_cleanup": record.t_cleanup,
        "t_inactive": record.t_inactive,
        "duration": float(system.get("duration", 0) or 0),
        "ncores": sum(len(cores) for cores in record.cores.values()),
        # cores held per rank while it runs (what `flux resource list` counts as allocated)
        "allocation": {str(r): len(c) for r, c in record.cores.items()}
        if state in (JobState.RUN, JobState.CLEANUP)
        else {},
        "expiration": record.t_run + limit if record.t_run and limit else 0.0,
        "cwd": str(system.get("cwd", "")),
        "queue": system.get("queue", ""),
        "burstable": bool(system.get("burstable")),
        "owner": job_owner(record.jobspec),
        "annotations": _annotations(record),
        "requeues": record.requeues,
    }
