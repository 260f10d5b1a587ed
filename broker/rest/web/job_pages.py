"""The job pages: the queue (and its live table), the submit form, one job (fields, eventlog, output), cancel.

Pages that call the instance or the user database are plain `def` (run in worker threads); the `async def`
ones only read the posted form on the event loop and hand the rest to a worker thread.
"""

# No `from __future__ import annotations`: FastAPI reads the parameters' annotations at runtime.

from collections.abc import Callable
from typing import Annotated, TypedDict
from urllib.parse import urlencode

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import RedirectResponse, StreamingResponse
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.responses import Response

from broker.client import FluxError
from broker.jobs.api import JobInfo
from broker.jobs.jobid import JobIdError, encode_f58, parse_jobid
from broker.rest.answers import EventRecord
from broker.rest.jobs import stream_lines
from broker.rest.submit import SubmitError, parse_submit
from broker.rest.users import Principal
from broker.rest.web.context import Web, WebContext
from broker.rest.web.pages import PageError, render, require_user
from broker.rest.web.session import CSRF_FIELD, CsrfError, check_csrf
from broker.rest.web.views import (
    STATE_FILTERS,
    EventRow,
    FormField,
    JobPage,
    command_text,
    errors_by_field,
    event_rows,
    job_fields,
    job_page,
    owner_label,
    status_word,
    submit_fields,
    submit_params,
    when,
)

ENOENT = 2
Text = Annotated[str, Query(max_length=200)]
Page = Annotated[int, Query(ge=1)]

router = APIRouter(include_in_schema=False)


class QueueValues(TypedDict):
    """What jobs.html and _jobs_table.html show."""

    listing: JobPage
    q: str
    state: str
    states: tuple[str, ...]
    query: str
    show_owner: bool


class SubmitValues(TypedDict):
    """What submit.html shows: the fields, what was entered, the errors by field ("" for the whole form)."""

    fields: list[FormField]
    values: dict[str, str]
    errors: dict[str, list[str]]


class JobValues(TypedDict):
    """What _job_status.html (and job.html around it) shows."""

    job: JobInfo
    fields: list[tuple[str, str]]
    events: list[EventRow] | None


def find(context: WebContext, jobid: str, user: Principal) -> JobInfo:
    """The job, or 404 alike for a bad id, a missing job and another user's job."""
    try:
        job = context.service.info(parse_jobid(jobid))
    except JobIdError as exc:
        raise PageError(404, f"There is no job {jobid}.") from exc
    except FluxError as exc:
        if exc.errnum == ENOENT:
            raise PageError(404, f"There is no job {jobid}.") from exc
        raise PageError(502, f"The instance did not answer: {exc}") from exc
    if not context.visible(user, job):
        raise PageError(404, f"There is no job {jobid}.")  # do not reveal other users' jobs
    return job


# ---------------------------------------------------------------------- the queue
def queue(context: WebContext, user: Principal, q: str, state: str, page: int) -> QueueValues:
    wanted = state if state in STATE_FILTERS else "all"
    show_owner = user.is_superuser and context.settings.require_auth  # who submitted what: the superuser sees all
    listing = job_page(context.visible_jobs(user, show_owner), q, wanted, page)
    query = urlencode({"q": q, "state": wanted})
    return QueueValues(listing=listing, q=q, state=wanted, states=STATE_FILTERS, query=query, show_owner=show_owner)


@router.get("/jobs")
def jobs(request: Request, context: Web, q: Text = "", state: Text = "all", page: Page = 1) -> Response:
    user = require_user(request, context)
    values = queue(context, user, q, state, page)
    return render(request, context, "jobs.html", {**values, **HELPERS}, user)


@router.get("/jobs/table")
def jobs_table(request: Request, context: Web, q: Text = "", state: Text = "all", page: Page = 1) -> Response:
    user = require_user(request, context, fragment=True)
    values = queue(context, user, q, state, page)
    return render(request, context, "_jobs_table.html", {**values, **HELPERS}, user)


# ---------------------------------------------------------------------- submit
@router.get("/jobs/submit")
def submit_form(request: Request, context: Web) -> Response:
    user = require_user(request, context)
    values = SubmitValues(fields=submit_fields(), values={}, errors={})
    return render(request, context, "submit.html", {**values}, user)


@router.post("/jobs/submit")
async def submit(request: Request, context: Web) -> Response:
    form = await request.form()
    return await run_in_threadpool(_submit_posted, request, context, form)


def _submit_posted(request: Request, context: WebContext, form: FormData) -> Response:
    user = require_user(request, context)
    check_csrf(request, form.get(CSRF_FIELD))
    fields = submit_fields()
    params = submit_params(form, fields)
    try:
        jobid = context.submit(user, parse_submit(params))
    except HTTPException as exc:  # this user may not run jobs here
        values = SubmitValues(fields=fields, values=params, errors={"": [str(exc.detail)]})
        return render(request, context, "submit.html", {**values}, user, status=exc.status_code)
    except SubmitError as exc:
        values = SubmitValues(fields=fields, values=params, errors=errors_by_field(exc.errors))
        return render(request, context, "submit.html", {**values}, user, status=400)
    except FluxError as exc:
        values = SubmitValues(fields=fields, values=params, errors={"": [exc.message]})
        return render(request, context, "submit.html", {**values}, user, status=400)
    return RedirectResponse(f"/jobs/{encode_f58(jobid)}", status_code=303)


# ---------------------------------------------------------------------- one job
def job_values(context: WebContext, job: JobInfo) -> JobValues:
    eventlog: Callable[[int], list[EventRecord]] | None = getattr(context.service, "eventlog", None)
    events = event_rows(eventlog(job.id)) if eventlog else None
    return JobValues(job=job, fields=job_fields(job), events=events)


def job_command(context: WebContext, job: JobInfo) -> str:
    """The command, from the jobspec (it never changes, so the live part of the page leaves it out)."""
    read: Callable[[int], list[str]] | None = getattr(context.service, "command", None)
    return command_text(read(job.id)) if read else ""


@router.get("/jobs/{jobid}")
def job(request: Request, jobid: str, context: Web) -> Response:
    user = require_user(request, context)
    found = find(context, jobid, user)
    lines, _, _ = context.service.output(found.id)
    output = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    values = {**job_values(context, found), **HELPERS, "command": job_command(context, found), "output": output}
    return render(request, context, "job.html", values, user)


@router.get("/jobs/{jobid}/status")
def job_status(request: Request, jobid: str, context: Web) -> Response:
    user = require_user(request, context, fragment=True)
    values = {**job_values(context, find(context, jobid, user)), **HELPERS}
    return render(request, context, "_job_status.html", values, user)


@router.post("/jobs/{jobid}/cancel")
async def job_cancel(request: Request, jobid: str, context: Web) -> Response:
    form = await request.form()
    return await run_in_threadpool(_cancel_posted, request, context, jobid, form)


def _cancel_posted(request: Request, context: WebContext, jobid: str, form: FormData) -> Response:
    user = require_user(request, context)
    check_csrf(request, form.get(CSRF_FIELD))
    found = find(context, jobid, user)
    try:
        context.service.cancel(found.id)
    except FluxError as exc:
        raise PageError(400, f"Job {found.f58} cannot be cancelled: {exc.message}.") from exc
    return RedirectResponse(f"/jobs/{found.f58}", status_code=303)


@router.get("/jobs/{jobid}/output/stream")
def job_output(request: Request, jobid: str, context: Web) -> StreamingResponse:
    user = require_user(request, context, fragment=True)
    found = find(context, jobid, user)
    return StreamingResponse(stream_lines(context.service, found.id), media_type="text/plain; charset=utf-8")


HELPERS = {"status_word": status_word, "when": when, "owner_label": owner_label}
__all__ = ["CsrfError", "router"]
