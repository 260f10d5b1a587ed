"""flux-core's job-list records as our JobInfo (both of the flux flavour's paths read jobs through here)."""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, cast

from broker.jobs.api import JobInfo
from broker.jobs.rest_records import RESULT_BITS, STATE_BITS

if TYPE_CHECKING:
    from broker.jobs.shapes import Annotations
    from broker.rest.topics import FluxJobRecord


def _int(value: object, default: int = 0) -> int:
    """flux's JobInfo reports unset numeric attributes as "" (JobInfo.defaults in job/info.py)."""
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else default


def _float(value: object) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


STATE_NAMES = {bit: name for name, bit in STATE_BITS.items()}
RESULT_NAMES = {bit: name for name, bit in RESULT_BITS.items()}


def returncode_of(waitstatus: int | None, result: str) -> int | None:
    """A job's return code as flux.job.JobInfo.returncode computes it (job/info.py): the exit status, or minus
    the signal that ended the job shell; -128 for a job canceled before it ran, 1 for one that failed before;
    None while the job is active."""
    if waitstatus is None:
        return {"CANCELED": -128, "FAILED": 1}.get(result)
    if os.WIFSIGNALED(waitstatus):
        return -os.WTERMSIG(waitstatus)
    if os.WIFEXITED(waitstatus):
        return os.WEXITSTATUS(waitstatus)
    return None


def job_info_from_list(record: FluxJobRecord, now: float | None = None) -> JobInfo:
    """Map one raw job-list record ("job-list.list" / "list-id" with attrs ["all"]) onto our JobInfo.

    flux.job.JobInfo does the same, but building one costs milliseconds of Python (it makes a namedtuple class
    per job); a 1,000-job listing spent seconds there. The record has the state and result as bits (flux/job.h),
    leaves out what is not known yet, and flattens the exception into exception_{occurred,severity,type,note};
    the derived fields (returncode, runtime) are computed as flux's JobInfo computes them.
    """
    result = RESULT_NAMES.get(_int(record.get("result")), "") if "result" in record else ""
    waitstatus = record.get("waitstatus")
    status = waitstatus if isinstance(waitstatus, int) and not isinstance(waitstatus, bool) else None
    t_run, t_cleanup = _float(record.get("t_run")), _float(record.get("t_cleanup"))
    if t_run > 0 and t_cleanup > 0:
        runtime = t_cleanup - t_run
    elif t_run > 0:
        runtime = (time.time() if now is None else now) - t_run
    else:
        runtime = 0.0
    occurred = bool(record.get("exception_occurred"))
    annotations = record.get("annotations")
    return JobInfo(
        id=int(record["id"]),
        state=STATE_NAMES.get(_int(record.get("state")), ""),
        result=result,
        returncode=returncode_of(status, result),
        nnodes=_int(record.get("nnodes")),
        ntasks=_int(record.get("ntasks")),
        nodelist=str(record.get("nodelist") or ""),
        runtime=runtime,
        name=str(record.get("name") or ""),
        userid=_int(record.get("userid")),
        urgency=_int(record.get("urgency"), 16),
        priority=_int(record.get("priority")),
        t_submit=_float(record.get("t_submit")),
        t_run=t_run,
        t_cleanup=t_cleanup,
        t_inactive=_float(record.get("t_inactive")),
        exception_type=str(record.get("exception_type") or "") if occurred else "",
        exception_note=str(record.get("exception_note") or "") if occurred else "",
        waitstatus=status,
        duration=_float(record.get("duration")),
        annotations=cast("Annotations", dict(annotations)) if isinstance(annotations, dict) else {},  # flux-core's JSON
        t_depend=_float(record.get("t_depend")),
        t_priority=_float(record.get("t_priority")),
        t_sched=_float(record.get("t_sched")),
        ncores=_int(record.get("ncores")),
        ranks=str(record.get("ranks") or ""),
        expiration=_float(record.get("expiration")),
        exception_severity=_int(record.get("exception_severity"), -1) if occurred else -1,
        cwd=str(record.get("cwd") or ""),
    )
