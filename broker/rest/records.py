"""Job records in the shapes the reference server (flux-restful-api over flux-core's job-list) answers with."""

from __future__ import annotations

from typing import Any

from broker.jobs.api import JobInfo

# flux-core's job states and results as job-list reports them (flux/job/state.h: a bitmask; result.h: an enum)
STATE_BITS = {"NEW": 1, "DEPEND": 2, "PRIORITY": 4, "SCHED": 8, "RUN": 16, "CLEANUP": 32, "INACTIVE": 64}
RESULT_CODES = {"COMPLETED": 0, "FAILED": 1, "CANCELED": 2, "TIMEOUT": 3}


def listing_record(job: JobInfo) -> dict[str, Any]:
    """One entry of GET /v1/jobs without details: job-list's record, with integer state and result."""
    record: dict[str, Any] = {
        "id": job.id,
        "userid": job.userid,
        "urgency": job.urgency,
        "priority": job.priority,
        "t_submit": job.t_submit,
        "state": STATE_BITS.get(job.state, 0),
        "name": job.name,
        "ntasks": job.ntasks,
        "nnodes": job.nnodes,
        "duration": job.duration,
    }
    if job.t_run:
        record["t_run"] = job.t_run
    if job.t_cleanup:
        record["t_cleanup"] = job.t_cleanup
    if job.nodelist:
        record["nodelist"] = job.nodelist
    if job.state == "INACTIVE":
        record["t_inactive"] = job.t_inactive
        record["success"] = job.success
        record["result"] = RESULT_CODES.get(job.result, 1)
        record["exception_occurred"] = bool(job.exception_type)
        if job.waitstatus is not None:
            record["waitstatus"] = job.waitstatus
    if job.exception_type:
        record["exception_type"] = job.exception_type
        record["exception_note"] = job.exception_note
    return record
