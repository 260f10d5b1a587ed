"""The job pages: sign in and out, the queue, one job (fields, eventlog, output), the submit form.

Pages that call the instance or the user database are plain `def` (run in worker threads); the `async def`
ones only read the posted form on the event loop and hand the rest to a worker thread.
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import RedirectResponse, StreamingResponse
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.responses import Response

from broker.client import FluxError
from broker.jobs.api import JobInfo
from broker.jobs.jobid import JobIdError, encode_f58, parse_jobid
from broker.rest.jobs import stream_lines
from broker.rest.submit import SubmitError, parse_submit
from broker.rest.users import Principal
from broker.rest.web.context import WebContext
from broker.rest.web.pages import PageError, render, require_user
from broker.rest.web.session import (
    CSRF_FIELD,
    CsrfError,
    check_csrf,
    clear_session,
    issue_session,
    safe_next,
    set_session,
)
from broker.rest.web.views import (
    STATE_FILTERS,
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


def job_router(context: WebContext) -> APIRouter:
    router = APIRouter(include_in_schema=False)
    settings, service = context.settings, context.service

    def find(jobid: str, user: Principal) -> JobInfo:
        """The job, or 404 alike for a bad id, a missing job and another user's job."""
        try:
            job = service.info(parse_jobid(jobid))
        except JobIdError as exc:
            raise PageError(404, f"There is no job {jobid}.") from exc
        except FluxError as exc:
            if exc.errnum == ENOENT:
                raise PageError(404, f"There is no job {jobid}.") from exc
            raise PageError(502, f"The instance did not answer: {exc}") from exc
        if not context.visible(user, job):
            raise PageError(404, f"There is no job {jobid}.")  # do not reveal other users' jobs
        return job

    # ------------------------------------------------------------------ session
    @router.get("/")
    def home() -> Response:
        return RedirectResponse("/jobs", status_code=303)

    @router.get("/login")
    def login_form(request: Request, next: Text = "/jobs") -> Response:
        if not settings.require_auth:
            return RedirectResponse(safe_next(next), status_code=303)
        return render(request, context, "login.html", {"next": safe_next(next), "error": ""})

    @router.post("/login")
    async def login(request: Request) -> Response:
        form = await request.form()
        return await run_in_threadpool(login_posted, request, form)  # bcrypt takes a quarter of a second

    def login_posted(request: Request, form: FormData) -> Response:
        check_csrf(request, form.get(CSRF_FIELD))
        target = safe_next(str(form.get("next") or ""))
        if not settings.require_auth:
            return RedirectResponse(target, status_code=303)
        name, password = form.get("username"), form.get("password")
        principal = None
        if isinstance(name, str) and isinstance(password, str) and name:
            principal = context.users.authenticate(name, password)
        if principal is None:
            values = {"next": target, "error": "Incorrect user name or password.", "username": name or ""}
            return render(request, context, "login.html", values, status=400)
        response = RedirectResponse(target, status_code=303)
        set_session(response, request, issue_session(context, principal), settings.token_minutes)
        return response

    @router.post("/logout")
    async def logout(request: Request) -> Response:
        check_csrf(request, (await request.form()).get(CSRF_FIELD))
        response = RedirectResponse("/login" if settings.require_auth else "/jobs", status_code=303)
        clear_session(response)
        return response

    # ------------------------------------------------------------------ the queue
    def queue(request: Request, user: Principal, q: str, state: str, page: int) -> dict[str, Any]:
        wanted = state if state in STATE_FILTERS else "all"
        show_owner = user.is_superuser and settings.require_auth  # who submitted what: the superuser sees all
        jobs = context.visible_jobs(user, show_owner)
        listing = job_page(jobs, q, wanted, page)
        query = urlencode({"q": q, "state": wanted})
        return {
            "listing": listing,
            "q": q,
            "state": wanted,
            "states": STATE_FILTERS,
            "query": query,
            "show_owner": show_owner,
        }

    @router.get("/jobs")
    def jobs(request: Request, q: Text = "", state: Text = "all", page: Annotated[int, Query(ge=1)] = 1) -> Response:
        user = require_user(request, context)
        values = queue(request, user, q, state, page)
        return render(request, context, "jobs.html", {**values, **HELPERS}, user)

    @router.get("/jobs/table")
    def jobs_table(
        request: Request, q: Text = "", state: Text = "all", page: Annotated[int, Query(ge=1)] = 1
    ) -> Response:
        user = require_user(request, context, fragment=True)
        values = queue(request, user, q, state, page)
        return render(request, context, "_jobs_table.html", {**values, **HELPERS}, user)

    # ------------------------------------------------------------------ submit
    @router.get("/jobs/submit")
    def submit_form(request: Request) -> Response:
        user = require_user(request, context)
        values = {"fields": submit_fields(), "values": {}, "errors": {}}
        return render(request, context, "submit.html", values, user)

    @router.post("/jobs/submit")
    async def submit(request: Request) -> Response:
        form = await request.form()
        return await run_in_threadpool(submit_posted, request, form)

    def submit_posted(request: Request, form: FormData) -> Response:
        user = require_user(request, context)
        check_csrf(request, form.get(CSRF_FIELD))
        fields = submit_fields()
        params = submit_params(form, fields)
        try:
            jobid = context.submit(user, parse_submit(params))
        except HTTPException as exc:  # this user may not run jobs here
            values = {"fields": fields, "values": params, "errors": {"": [str(exc.detail)]}}
            return render(request, context, "submit.html", values, user, status=exc.status_code)
        except SubmitError as exc:
            values = {"fields": fields, "values": params, "errors": errors_by_field(exc.errors)}
            return render(request, context, "submit.html", values, user, status=400)
        except FluxError as exc:
            values = {"fields": fields, "values": params, "errors": {"": [exc.message]}}
            return render(request, context, "submit.html", values, user, status=400)
        return RedirectResponse(f"/jobs/{encode_f58(jobid)}", status_code=303)

    # ------------------------------------------------------------------ one job
    def job_values(job: JobInfo) -> dict[str, Any]:
        eventlog = getattr(service, "eventlog", None)
        events = event_rows(eventlog(job.id)) if eventlog else None
        return {"job": job, "fields": job_fields(job), "events": events, **HELPERS}

    def job_command(job: JobInfo) -> str:
        """The command, from the jobspec (it never changes, so the live part of the page leaves it out)."""
        read = getattr(service, "command", None)
        return command_text(read(job.id)) if read else ""

    @router.get("/jobs/{jobid}")
    def job(request: Request, jobid: str) -> Response:
        user = require_user(request, context)
        found = find(jobid, user)
        lines, _, _ = service.output(found.id)
        output = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
        values = {**job_values(found), "command": job_command(found), "output": output}
        return render(request, context, "job.html", values, user)

    @router.get("/jobs/{jobid}/status")
    def job_status(request: Request, jobid: str) -> Response:
        user = require_user(request, context, fragment=True)
        return render(request, context, "_job_status.html", job_values(find(jobid, user)), user)

    @router.post("/jobs/{jobid}/cancel")
    async def job_cancel(request: Request, jobid: str) -> Response:
        form = await request.form()
        return await run_in_threadpool(cancel_posted, request, jobid, form)

    def cancel_posted(request: Request, jobid: str, form: FormData) -> Response:
        user = require_user(request, context)
        check_csrf(request, form.get(CSRF_FIELD))
        found = find(jobid, user)
        try:
            service.cancel(found.id)
        except FluxError as exc:
            raise PageError(400, f"Job {found.f58} cannot be cancelled: {exc.message}.") from exc
        return RedirectResponse(f"/jobs/{found.f58}", status_code=303)

    @router.get("/jobs/{jobid}/output/stream")
    def job_output(request: Request, jobid: str) -> StreamingResponse:
        user = require_user(request, context, fragment=True)
        found = find(jobid, user)
        return StreamingResponse(stream_lines(service, found.id), media_type="text/plain; charset=utf-8")

    return router


HELPERS = {"status_word": status_word, "when": when, "owner_label": owner_label}
__all__ = ["CsrfError", "job_router"]
