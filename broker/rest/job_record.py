"""GET /v1/jobs/{id}'s job record (and each entry of GET /v1/jobs) as a client reads it: flux-core's job-list
record as flux-restful-api answers it, which broker/jobs/rest_records.py writes for ours.

Missing from broker/jobs/shapes.py, so named here (for the REST client); rest_records.py may adopt it there.
"""

from __future__ import annotations

from typing import TypedDict


class RecordException(TypedDict, total=False):
    """A detailed record's exception: whether one occurred, and its severity ("" when none), type and note."""

    occurred: bool
    severity: int | str
    type: str
    note: str


class JobRecord(TypedDict, total=False):
    """A job record: a listing's entries have integer state and result (flux/job.h bits) and only the keys
    known so far; the detailed record spells state and result out, and fills unknown numbers with ""."""

    id: int
    userid: int
    urgency: int
    priority: int
    t_submit: float
    t_depend: float
    t_priority: float
    t_sched: float
    t_run: float
    t_cleanup: float
    t_inactive: float
    state: int | str
    name: str
    ntasks: int
    ncores: int
    duration: float
    nnodes: int | str
    ranks: str
    nodelist: str
    success: bool
    exception_occurred: bool
    exception_type: str
    exception_severity: int
    exception_note: str
    result: int | str
    expiration: float | str
    annotations: dict[str, object]  # open: whatever the scheduler or `flux job annotate` attached
    waitstatus: int | str
    cwd: str
    returncode: int | str
    runtime: float
    exception: RecordException
