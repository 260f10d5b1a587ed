"""The FastAPI application: Flux RESTful API v1 paths, parameters, response shapes and status codes.

Quirks existing clients rely on are kept: submit parameters may come as a query string, a form or JSON;
an unauthenticated request gets 401 with a `WWW-Authenticate` header naming /v1/token, where a client
exchanges an HS256 handshake JWT (or HTTP Basic credentials) for a bearer access token.
"""

import base64
import binascii
import json
import os
import pwd
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import FastAPI, Form, HTTPException, Query, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.concurrency import run_in_threadpool

from broker.client import FluxError
from broker.jobs.api import JobInfo
from broker.jobs.rest_records import detail_record, listing_record
from broker.rest import access
from broker.rest.auth import issue_token, token_principal
from broker.rest.body_guard import BodyLimit, BodyTooLarge
from broker.rest.fast_read import FastJobRead, FrontedFastAPI
from broker.rest.jobs import JOB_LIST_LIMIT, JobService, SubmitError, asynchronous, parse_submit, stream_lines
from broker.rest.large import LargeJSONResponse
from broker.rest.reads_first import ReadsFirst
from broker.rest.schemas import BAD_ID, DENIED, PROTECTED, Detail, Invalid, Submitted, submit_openapi
from broker.rest.settings import RestSettings
from broker.rest.tokens import TokenError, decode_handshake
from broker.rest.users import Principal, UserStore
from broker.rest.users_api import users_router
from broker.rest.web import WebContext, mount_web


def _unauthorized(request: Request, detail: str) -> HTTPException:
    base = str(request.base_url).rstrip("/")
    challenge = f'Bearer realm="{base}/v1/token",service="{base}",scope="job"'
    return HTTPException(status_code=401, detail=detail, headers={"WWW-Authenticate": challenge})


def denied(reason: str) -> Any:
    """A refused token request: 400 with the reference server's {"Message": "Denied"} (and why, in `detail`)."""
    return JSONResponse({"Message": "Denied", "detail": reason}, status_code=400)


def _basic(header: str) -> tuple[str, str] | None:
    try:
        decoded = base64.b64decode(header, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, sep, password = decoded.partition(":")
    return (user, password) if sep else None


def create_app(settings: RestSettings, service: JobService, users: UserStore | None = None) -> FastAPI:
    """One app per lead broker. `service` talks to the instance; `users` is the bcrypt user database.

    Nothing that blocks runs on the event loop. The hot routes (one job, submit) are `async def` and await the
    instance through `asynchronous(service)`: on the built-in broker, an RPC awaited on the loop itself (no
    thread hand-off: broker/rest/async_broker.py says why), on flux-core a call in a worker thread. The other
    routes that call the instance or the user database are plain `def` (FastAPI runs them in its worker
    threads); they authenticate there and return a ready JSONResponse, so a request waits for one thread
    handover, not three."""
    users = users or UserStore(settings.database)
    if settings.superuser:
        users.ensure(settings.superuser, settings.superuser_password, superuser=True)
    app = FrontedFastAPI(
        title="Flux RESTful API (miniclusters)",
        version="1.0.0",
        description="Submit and watch jobs on a MiniCluster's lead broker; compatible with flux-restful-api v1.",
    )
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes)

    async def body_too_large(request: Request, exc: Exception) -> JSONResponse:
        return BodyLimit(app, settings.max_body_bytes).too_large()

    app.add_exception_handler(BodyTooLarge, body_too_large)
    app.state.users = users
    app.state.service = service
    jobs = asynchronous(service)  # what the hot routes await on the loop (broker/rest/jobs.py)
    reads_first = ReadsFirst()
    app.state.settings = settings

    anonymous = Principal(name=pwd.getpwuid(os.getuid()).pw_name, is_superuser=True)

    def bearer_principal(header: str) -> Principal | None:
        """Who a bearer token names (anyone, with no authentication configured); None for other credentials,
        which only the route checks. Raises TokenError for a token that does not check out. The one token
        check of both current_user and the fast path (read_job_plainly)."""
        if not settings.require_auth:
            return anonymous
        scheme, _, credentials = header.partition(" ")
        if scheme.lower() == "bearer" and credentials:
            return token_principal(users, settings, credentials.strip())
        return None

    def current_user(request: Request) -> Principal:
        header = request.headers.get("authorization", "")
        try:
            principal = bearer_principal(header)
        except TokenError as exc:
            raise _unauthorized(request, str(exc)) from exc
        if principal is not None:
            return principal
        scheme, _, credentials = header.partition(" ")
        if scheme.lower() == "basic" and credentials:
            pair = _basic(credentials.strip())
            principal = users.authenticate(*pair) if pair else None
            if principal is None:
                raise _unauthorized(request, "incorrect user or password")
            return principal
        raise _unauthorized(request, "authentication required")

    async def current_user_async(request: Request) -> Principal:
        """current_user from the event loop: a bearer token is checked there (an HMAC and one read of the user
        database by its key, microseconds); a password (bcrypt: tens of ms of CPU) is checked in a thread."""
        scheme = request.headers.get("authorization", "").partition(" ")[0].lower()
        if not settings.require_auth or scheme == "bearer":
            return current_user(request)
        return await run_in_threadpool(current_user, request)

    def lookup(jobid: str, principal: Principal) -> JobInfo:
        return access.lookup(service, jobid, principal, settings)

    # ------------------------------------------------------------------ tokens
    def new_token(principal: Principal) -> str:
        return issue_token(users, settings, principal)

    @app.get("/v1/auth", tags=["auth"])
    def auth_info() -> dict[str, Any]:
        """How to authenticate here (public), as the reference server describes it."""
        backend = "shared-secret" if settings.secret_key else "database"
        return {
            "backend": backend if settings.require_auth else "none",
            "password_login": settings.require_auth,
            "shared_secret_handshake": bool(settings.require_auth and settings.secret_key),
        }

    @app.post("/v1/token", tags=["auth"], responses=DENIED)
    def token(request: Request) -> dict[str, str]:
        """Exchange a handshake JWT (signed with FLUX_SECRET_KEY) or Basic credentials for an access token.

        A refusal is 400 (OAuth2 invalid_grant), never 401: clients answer a 401 by coming back here.
        """
        header = request.headers.get("authorization", "")
        scheme, _, credentials = header.partition(" ")
        principal: Principal | None = None
        if scheme.lower() == "bearer" and credentials and settings.secret_key:
            try:
                user, password = decode_handshake(credentials.strip(), settings.secret_key)
            except TokenError as exc:
                return denied(str(exc))
            principal = users.authenticate(user, password)
        elif scheme.lower() == "basic" and credentials:
            pair = _basic(credentials.strip())
            principal = users.authenticate(*pair) if pair else None
        elif scheme.lower() == "bearer" and credentials:
            return denied("the shared-secret token handshake is not enabled on this server (no FLUX_SECRET_KEY)")
        elif not credentials:
            return denied("missing Authorization header")
        if principal is None:
            return denied("incorrect user or password")
        return {"access_token": new_token(principal), "token_type": "Bearer"}

    @app.post("/v1/login/access-token", tags=["auth"], responses=DENIED)
    def login(username: Annotated[str, Form()], password: Annotated[str, Form()]) -> dict[str, str]:
        """OAuth2 password flow (form fields username and password); a refusal is 400 as at /v1/token."""
        principal = users.authenticate(username, password)
        if principal is None:
            return denied("incorrect user or password")
        return {"access_token": new_token(principal), "token_type": "bearer"}

    # ------------------------------------------------------------------ jobs
    def restful(job: JobInfo) -> dict[str, Any]:
        return detail_record(job)

    @app.get("/v1/jobs", tags=["jobs"], responses=PROTECTED)
    def list_jobs(
        request: Request,
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
        user = current_user(request)
        passed_on = getattr(service, "restful_listing", None)  # the built-in broker renders it (issue 27)
        if (detail or details) and passed_on is not None:
            owner = access.listing_owner(user, settings)
            body = passed_on(limit or JOB_LIST_LIMIT, keyed=not listing, owner=owner)
            return Response(body, media_type="application/json")
        jobs = access.visible_jobs(service, user, settings, limit=limit or JOB_LIST_LIMIT)
        if limit is not None:
            jobs = jobs[:limit]
        if not (detail or details):
            return LargeJSONResponse({"jobs": [listing_record(j) for j in jobs]})
        records = {str(j.id): restful(j) for j in jobs}
        return LargeJSONResponse(list(records.values()) if listing else records)

    @app.get("/v1/jobs/search", tags=["jobs"], responses=PROTECTED)
    def search_jobs(
        request: Request,
        start: Annotated[int, Query(ge=0, le=10**9)] = 0,
        length: Annotated[int | None, Query(ge=0, le=10**6)] = None,
        draw: Annotated[int, Query(ge=0, le=10**9)] = 1,
        query: Annotated[str | None, Query(max_length=1000)] = None,
    ) -> JSONResponse:
        """The DataTables-style search the upstream web UI uses."""
        user = current_user(request)
        text = query or request.query_params.get("search[value]") or request.query_params.get("search") or ""
        mine = access.visible_jobs(service, user, settings)
        total = len(mine)
        if text:
            # as upstream: match the job's name (and, usefully, its id in either spelling)
            needle = text.lower()
            mine = [j for j in mine if needle in j.name.lower() or needle in str(j.id) or needle in j.f58.lower()]
        jobs = [restful(j) for j in mine]
        filtered = len(jobs)
        jobs = jobs[start:]
        if length is not None:
            jobs = jobs[:length]
        return LargeJSONResponse({"data": jobs, "draw": draw, "recordsTotal": total, "recordsFiltered": filtered})

    @app.post(
        "/v1/jobs/submit",
        tags=["jobs"],
        response_model=Submitted,
        responses={
            **PROTECTED,
            400: {"model": Invalid, "description": "invalid parameters, each named"},
            403: {"model": Detail, "description": "the user's account on the lead may not run jobs"},
        },
        openapi_extra=submit_openapi(),
    )
    async def submit(request: Request) -> JSONResponse:
        """Submit a job; parameters from the query string, a form or a JSON body (command is required)."""
        params: dict[str, Any] = dict(request.query_params)
        content_type = request.headers.get("content-type", "")
        problem = ""
        try:  # reading the body is the only part on the event loop
            if "application/json" in content_type:
                body = await request.json()
                if isinstance(body, dict):
                    params.update(body)
                elif body is not None:
                    problem = "body: must be a JSON object"
            elif "form" in content_type:
                params.update({k: v for k, v in (await request.form()).items() if isinstance(v, str)})
            elif await request.body():
                problem = "body: send JSON (application/json) or a form"
        except UnicodeDecodeError:
            problem = "body: not UTF-8"
        except ValueError:
            problem = "body: not valid JSON"
        await reads_first.turn()  # a read of a job in progress goes first (broker/rest/reads_first.py)
        user = await current_user_async(request)
        try:
            if problem:
                raise SubmitError([problem])
            jobid = await access.submit_as_async(jobs, parse_submit(params), user, settings)
        except SubmitError as exc:  # the parameters, or the cluster cannot meet them (GPUs it does not have)
            return JSONResponse({"Message": "Invalid submit request", "Errors": exc.errors}, status_code=400)
        except FluxError as exc:
            return JSONResponse(
                {"Message": "There was an issue submitting that job.", "Errors": [exc.message]}, status_code=400
            )
        return JSONResponse({"Message": "Job submit.", "id": jobid})

    async def job_body(jobid: str, principal: Principal) -> bytes:
        """One job's record as JSONResponse encodes it; HTTPException 400, 404 or 502 as `lookup` says."""
        record = restful(await access.lookup_async(jobs, jobid, principal, settings))
        return json.dumps(record, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()

    @app.get("/v1/jobs/{jobid}", tags=["jobs"], responses={**PROTECTED, **BAD_ID})
    async def get_job(jobid: str, request: Request) -> Response:
        """One job: attributes, state, result, returncode, nnodes, nodelist, runtime, exception."""
        async with reads_first.read():
            user = await current_user_async(request)
            return Response(await job_body(jobid, user), media_type="application/json")

    async def read_job_plainly(jobid: str, authorization: str) -> bytes | HTTPException | None:
        """get_job for broker/rest/fast_read.py, given a bearer token (or no authentication configured): the body
        or the lookup's error. None (the route answers, 401 and its challenge) for any other credentials."""
        async with reads_first.read():
            try:
                principal = bearer_principal(authorization)
            except TokenError:
                return None
            if principal is None:
                return None
            try:
                return await job_body(jobid, principal)
            except HTTPException as exc:
                return exc

    app.front = lambda stack: FastJobRead(stack, read_job_plainly)

    @app.get("/v1/jobs/{jobid}/output", tags=["jobs"], responses={**PROTECTED, **BAD_ID})
    def get_output(jobid: str, request: Request) -> JSONResponse:
        """Output lines so far; an unknown id is 200 with a Message, as the reference server answers."""
        try:
            job = lookup(jobid, current_user(request))
        except HTTPException as exc:
            if exc.status_code != 404:
                raise
            return JSONResponse({"Message": "The output does not exist yet, or the jobid is incorrect."})
        lines, _, _ = service.output(job.id)
        return JSONResponse({"Output": lines})

    @app.get("/v1/jobs/{jobid}/output/stream", tags=["jobs"], responses={**PROTECTED, **BAD_ID})
    def stream_output(jobid: str, request: Request) -> StreamingResponse:
        """Output lines as they are written, until the job ends."""
        job = lookup(jobid, current_user(request))
        return StreamingResponse(stream_lines(service, job.id), media_type="text/plain")

    @app.post("/v1/jobs/{jobid}/cancel", tags=["jobs"], responses={**PROTECTED, **BAD_ID})
    def cancel(jobid: str, request: Request) -> JSONResponse:
        """Cancel a job; `id` comes back as the string the caller gave, and refusals are 400, as the reference's."""
        user = current_user(request)
        try:
            job = lookup(jobid, user)
        except HTTPException as exc:
            if exc.status_code != 404:
                raise
            return JSONResponse({"Message": f"Job cannot be cancelled: {exc.detail}.", "id": jobid}, status_code=400)
        try:
            service.cancel(job.id)
        except FluxError as exc:
            return JSONResponse({"Message": f"Job cannot be cancelled: {exc.message}.", "id": jobid}, status_code=400)
        return JSONResponse({"Message": "Job is requested to cancel.", "id": jobid})

    @app.get("/v1/nodes", tags=["nodes"], responses=PROTECTED)
    def nodes(request: Request) -> JSONResponse:
        """Up nodes, each host once (ranks sharing a host, as in a test instance, are one node)."""
        current_user(request)
        return JSONResponse({"nodes": list(dict.fromkeys(service.nodes()))})

    @app.post("/v1/service/stop", tags=["service"], responses={**PROTECTED, 403: {"model": Detail}})
    def stop(request: Request) -> dict[str, str]:
        """Shut the instance down (superuser only)."""
        if not current_user(request).is_superuser:
            raise HTTPException(403, "only the superuser may stop the service")
        service.shutdown()
        return {"Message": "Service is stopping."}

    app.include_router(users_router(users, settings, current_user))
    mount_web(
        app,
        WebContext(
            settings,
            service,
            users,
            authenticate=current_user,
            visible=lambda principal, job: access.visible(principal, job, settings),
            submit=lambda principal, request: access.submit_as(service, request, principal, settings),
            visible_jobs=lambda principal, owners: access.visible_jobs(service, principal, settings, owners=owners),
        ),
    )
    hot_routes_first(app, (search_jobs, submit, get_job))
    return app


def hot_routes_first(app: FastAPI, endpoints: tuple[Callable[..., Any], ...]) -> None:
    """Move the routes of `endpoints` to the front of the app's routes, in the order given.

    Starlette tries routes in order, a path match each (about 8 us here); FastAPI's documentation routes and
    ours registered before came ahead of a GET of one job, ten tries for every request. The paths moved do
    not overlap with any route moved past (/v1/jobs/search stays ahead of /v1/jobs/{jobid})."""
    hot = [
        route for endpoint in endpoints for route in app.router.routes if getattr(route, "endpoint", None) is endpoint
    ]
    app.router.routes[:] = hot + [route for route in app.router.routes if route not in hot]


AppFactory = Callable[[RestSettings, JobService], FastAPI]
