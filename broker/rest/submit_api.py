"""POST /v1/jobs/submit: parameters from the query string, a form or a JSON body, as existing clients send them.

`async def`: reading the body is the only part on the event loop; the instance is awaited there too (the
built-in broker's RPC) or in a worker thread (flux-core), through RestState.jobs.
"""

# No `from __future__ import annotations`: FastAPI reads the parameters' annotations at runtime.

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from broker.client import FluxError
from broker.rest import access
from broker.rest.jobs import SubmitError, parse_submit
from broker.rest.json_types import JsonObject
from broker.rest.schemas import PROTECTED, Detail, Invalid, Submitted, submit_openapi
from broker.rest.state import Rest

router = APIRouter(tags=["jobs"])


async def _read_params(request: Request) -> tuple[JsonObject, str]:
    """The parameters (query string, then the body's), and what is wrong with the body ("" when nothing); the
    open JSON object that parse_submit validates."""
    query = dict(request.query_params)
    content_type = request.headers.get("content-type", "")
    try:
        if "application/json" in content_type:
            body = await request.json()
            if isinstance(body, dict):
                return {**query, **body}, ""
            return query, "" if body is None else "body: must be a JSON object"
        if "form" in content_type:
            return {**query, **{k: v for k, v in (await request.form()).items() if isinstance(v, str)}}, ""
        if await request.body():
            return query, "body: send JSON (application/json) or a form"
    except UnicodeDecodeError:
        return query, "body: not UTF-8"
    except ValueError:
        return query, "body: not valid JSON"
    return query, ""


@router.post(
    "/v1/jobs/submit",
    response_model=Submitted,
    responses={
        **PROTECTED,
        400: {"model": Invalid, "description": "invalid parameters, each named"},
        403: {"model": Detail, "description": "the user's account on the lead may not run jobs"},
    },
    openapi_extra=submit_openapi(),
)
async def submit(request: Request, rest: Rest) -> JSONResponse:
    """Submit a job; parameters from the query string, a form or a JSON body (command is required)."""
    params, problem = await _read_params(request)
    await rest.reads_first.turn()  # a read of a job in progress goes first (broker/rest/reads_first.py)
    user = await rest.auth.current_user_async(request)
    try:
        if problem:
            raise SubmitError([problem])
        jobid = await access.submit_as_async(rest.jobs, parse_submit(params), user, rest.settings)
    except SubmitError as exc:  # the parameters, or the cluster cannot meet them (GPUs it does not have)
        return JSONResponse({"Message": "Invalid submit request", "Errors": exc.errors}, status_code=400)
    except FluxError as exc:
        return JSONResponse(
            {"Message": "There was an issue submitting that job.", "Errors": [exc.message]}, status_code=400
        )
    return JSONResponse({"Message": "Job submit.", "id": jobid})
