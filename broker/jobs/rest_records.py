"""Job records in the shapes the reference server (flux-restful-api 1.1.0 over flux-core's job-list) answers with.

GET /v1/jobs lists job-list records (integer state and result, as flux.job.job_list returns them);
GET /v1/jobs/{id} and the detailed listings give the same record with the state and result spelled out,
plus returncode, runtime and an exception object. Fields job-list leaves out until they are known
(t_run, nodelist, exception_type...) are left out here too, so a client sees what it would see from Flux.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:  # the job API is the client's: the broker's job manager loads it on its first REST listing
    from broker.jobs.api import JobInfo
    from broker.jobs.shapes import JobListRecord

# flux-core's job states and results as job-list reports them (both bitmasks: flux/job.h)
STATE_BITS = {"NEW": 1, "DEPEND": 2, "PRIORITY": 4, "SCHED": 8, "RUN": 16, "CLEANUP": 32, "INACTIVE": 64}
RESULT_BITS = {"COMPLETED": 1, "FAILED": 2, "CANCELED": 4, "TIMEOUT": 8}
_TIMES: tuple[Literal["t_depend", "t_priority", "t_sched", "t_run", "t_cleanup"], ...] = (
    "t_depend",
    "t_priority",
    "t_sched",
    "t_run",
    "t_cleanup",
)
"""The times job-list reports once they happened."""


def listing_record(job: JobInfo) -> JobListRecord:
    """One entry of GET /v1/jobs without details: job-list's record, with integer state and result."""
    record: JobListRecord = {
        "id": job.id,
        "userid": job.userid,
        "urgency": job.urgency,
        "priority": job.priority,
        "t_submit": job.t_submit,
    }
    for name in _TIMES:
        if getattr(job, name):
            record[name] = getattr(job, name)
    if job.state == "INACTIVE":
        record["t_inactive"] = job.t_inactive
    record["state"] = STATE_BITS.get(job.state, 0)
    record["name"] = job.name
    record["ntasks"] = job.ntasks
    if job.ncores:
        record["ncores"] = job.ncores
    record["duration"] = job.duration
    if job.nnodes:
        record["nnodes"] = job.nnodes
    if job.ranks:
        record["ranks"] = job.ranks
    if job.nodelist:
        record["nodelist"] = job.nodelist
    if job.state == "INACTIVE":
        record["success"] = job.success
        record["exception_occurred"] = bool(job.exception_type)
        if job.exception_type:
            record["exception_type"] = job.exception_type
            record["exception_severity"] = max(job.exception_severity, 0)
            record["exception_note"] = job.exception_note
        record["result"] = RESULT_BITS.get(job.result, RESULT_BITS["FAILED"])
    if job.t_run:
        record["expiration"] = job.expiration
    record["annotations"] = job.annotations.copy()
    if job.waitstatus is not None:
        record["waitstatus"] = job.waitstatus
    if job.cwd:
        record["cwd"] = job.cwd
    return record


def detail_record(job: JobInfo) -> JobListRecord:
    """GET /v1/jobs/{id}: the job-list record with state and result as words, returncode, runtime, exception."""
    record = listing_record(job)
    record.setdefault("ranks", "")  # the reference fills these in for its data tables
    record.setdefault("expiration", "")
    record["state"] = job.state
    record["result"] = job.result  # "" while active, as flux's JobInfo says
    record["nnodes"] = job.nnodes or ""
    record["nodelist"] = job.nodelist
    record["waitstatus"] = job.waitstatus if job.waitstatus is not None else ""
    record["returncode"] = job.returncode if job.returncode is not None else ""
    record["runtime"] = job.runtime
    record["exception"] = {
        "occurred": bool(job.exception_type),
        "severity": max(job.exception_severity, 0) if job.exception_type else "",
        "type": job.exception_type,
        "note": job.exception_note,
    }
    return record
