"""The /v1/jobs routes but submit (broker/rest/submit_api.py): the listing, the search, one job, its output, cancel.

The hot reads (the search, one job) are routers of their own, which the app puts ahead of every other route
(broker/rest/app.py: hot_routes_first). One job is `async def` and awaits the instance on the event loop; the
others are plain `def` (FastAPI runs them in its worker threads): they authenticate there, after FastAPI has
validated their parameters, and return a ready JSONResponse, so a request waits for one thread hand-over.
"""

# No `from __future__ import annotations`: FastAPI reads the parameters' annotations at runtime.

from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from broker.client import FluxError
from broker.jobs.api import JobInfo
from broker.jobs.rest_records import detail_record, listing_record
from broker.rest import access
from broker.rest.jobs import JOB_LIST_LIMIT, stream_lines
from broker.rest.large import LargeJSONResponse
from broker.rest.schemas import BAD_ID, PROTECTED
from broker.rest.state import Rest, RestState
from broker.rest.users import Principal

search_router = APIRouter(tags=["jobs"])
one_job_router = APIRouter(tags=["jobs"])
router = APIRouter(tags=["jobs"])


@router.get("/v1/jobs", responses=PROTECTED)
def list_jobs(
    request: Request,
    rest: Rest,
    details: bool = False,
    detail: bool = False,
    listing: bool = False,
    limit: Annotated[int | None, Query(ge=1, le=100000)] = None,
) -> Response:
    """Jobs (the caller's own in multi-user mode), newest first: the newest 1,000 (flux-core's job-list
    default, as the reference server lists) unless `limit` asks for another number.

    `details` (the reference server's name; `detail`, which the 0.2.1 client sends, too) gives full
    records keyed by id, or as a list with `listing`; without it, job-list records with integer state
    and result, as the reference answers.
    """
    user = rest.auth.current_user(request)
    if detail or details:
        return _detailed_listing(rest, user, limit, listing)
    jobs = access.visible_jobs(rest.service, user, rest.settings, limit=limit or JOB_LIST_LIMIT)
    return LargeJSONResponse({"jobs": [listing_record(j) for j in jobs[:limit]]})


def _detailed_listing(rest: RestState, user: Principal, limit: int | None, listing: bool) -> Response:
    """Full records, keyed by id (or a list with `listing`); rendered by the built-in broker when it can."""
    passed_on = getattr(rest.service, "restful_listing", None)  # the built-in broker renders it (issue 27)
    if passed_on is not None:
        owner = access.listing_owner(user, rest.settings)
        body = passed_on(limit or JOB_LIST_LIMIT, keyed=not listing, owner=owner)
        return Response(body, media_type="application/json")
    jobs = access.visible_jobs(rest.service, user, rest.settings, limit=limit or JOB_LIST_LIMIT)[:limit]
    records = {str(j.id): detail_record(j) for j in jobs}
    return LargeJSONResponse(list(records.values()) if listing else records)


def _matches(job: JobInfo, needle: str) -> bool:
    """As upstream: the job's name matches (and, usefully, its id in either spelling)."""
    return needle in job.name.lower() or needle in str(job.id) or needle in job.f58.lower()


@search_router.get("/v1/jobs/search", responses=PROTECTED)
def search_jobs(
    request: Request,
    rest: Rest,
    start: Annotated[int, Query(ge=0, le=10**9)] = 0,
    length: Annotated[int | None, Query(ge=0, le=10**6)] = None,
    draw: Annotated[int, Query(ge=0, le=10**9)] = 1,
    query: Annotated[str | None, Query(max_length=1000)] = None,
) -> JSONResponse:
    """The DataTables-style search the upstream web UI uses."""
    user = rest.auth.current_user(request)
    text = query or request.query_params.get("search[value]") or request.query_params.get("search") or ""
    mine = access.visible_jobs(rest.service, user, rest.settings)
    total = len(mine)
    if text:
        mine = [j for j in mine if _matches(j, text.lower())]
    jobs = [detail_record(j) for j in mine]
    filtered = len(jobs)
    jobs = jobs[start:] if length is None else jobs[start:][:length]
    return LargeJSONResponse({"data": jobs, "draw": draw, "recordsTotal": total, "recordsFiltered": filtered})


@one_job_router.get("/v1/jobs/{jobid}", responses={**PROTECTED, **BAD_ID})
async def get_job(jobid: str, request: Request, rest: Rest) -> Response:
    """One job: attributes, state, result, returncode, nnodes, nodelist, runtime, exception."""
    async with rest.reads_first.read():
        user = await rest.auth.current_user_async(request)
        return Response(await rest.job_body(jobid, user), media_type="application/json")


@router.get("/v1/jobs/{jobid}/output", responses={**PROTECTED, **BAD_ID})
def get_output(jobid: str, request: Request, rest: Rest) -> JSONResponse:
    """Output lines so far; an unknown id is 200 with a Message, as the reference server answers."""
    try:
        job = rest.lookup(jobid, rest.auth.current_user(request))
    except HTTPException as exc:
        if exc.status_code != 404:
            raise
        return JSONResponse({"Message": "The output does not exist yet, or the jobid is incorrect."})
    lines, _, _ = rest.service.output(job.id)
    return JSONResponse({"Output": lines})


@router.get("/v1/jobs/{jobid}/output/stream", responses={**PROTECTED, **BAD_ID})
def stream_output(jobid: str, request: Request, rest: Rest) -> StreamingResponse:
    """Output lines as they are written, until the job ends."""
    job = rest.lookup(jobid, rest.auth.current_user(request))
    return StreamingResponse(stream_lines(rest.service, job.id), media_type="text/plain")


@router.post("/v1/jobs/{jobid}/cancel", responses={**PROTECTED, **BAD_ID})
def cancel(jobid: str, request: Request, rest: Rest) -> JSONResponse:
    """Cancel a job; `id` comes back as the string the caller gave, and refusals are 400, as the reference's."""
    user = rest.auth.current_user(request)
    try:
        job = rest.lookup(jobid, user)
    except HTTPException as exc:
        if exc.status_code != 404:
            raise
        return JSONResponse({"Message": f"Job cannot be cancelled: {exc.detail}.", "id": jobid}, status_code=400)
    try:
        rest.service.cancel(job.id)
    except FluxError as exc:
        return JSONResponse({"Message": f"Job cannot be cancelled: {exc.message}.", "id": jobid}, status_code=400)
    return JSONResponse({"Message": "Job is requested to cancel.", "id": jobid})
