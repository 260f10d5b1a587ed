"""What every route of one app shares: the instance, the user database, the settings, who is asking.

The app factory (broker/rest/app.py) builds one RestState and keeps it at `app.state.rest`; the routers reach it
through the `Rest` dependency (an `async def`: no worker-thread hand-off to find it).
"""

# No `from __future__ import annotations`: FastAPI reads the dependencies below from annotations at runtime.

import json
from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, HTTPException, Request

from broker.jobs.api import JobInfo
from broker.jobs.rest_records import detail_record
from broker.rest import access
from broker.rest.identity import Authenticator
from broker.rest.jobs import AsyncJobService, JobService, SubmitRequest, asynchronous
from broker.rest.reads_first import ReadsFirst
from broker.rest.settings import RestSettings
from broker.rest.tokens import TokenError
from broker.rest.users import Principal, UserStore


@dataclass
class RestState:
    """One lead broker's REST server. `service` talks to the instance (blocking: call it from worker threads);
    `jobs` is what the hot routes await on the event loop (broker/rest/jobs.py: asynchronous)."""

    settings: RestSettings
    service: JobService
    users: UserStore
    auth: Authenticator = field(init=False)
    jobs: AsyncJobService = field(init=False)
    reads_first: ReadsFirst = field(default_factory=ReadsFirst)

    def __post_init__(self) -> None:
        self.auth = Authenticator(self.settings, self.users)
        self.jobs = asynchronous(self.service)

    # ------------------------------------------------------------------ the access rule, bound to this server
    def lookup(self, jobid: str, principal: Principal) -> JobInfo:
        """The job, or HTTPException 400, 404 or 502 (access.lookup)."""
        return access.lookup(self.service, jobid, principal, self.settings)

    def visible(self, principal: Principal, job: JobInfo) -> bool:
        return access.visible(principal, job, self.settings)

    def submit_as(self, principal: Principal, request: SubmitRequest) -> int:
        return access.submit_as(self.service, request, principal, self.settings)

    def visible_jobs(self, principal: Principal, owners: bool) -> list[JobInfo]:
        return access.visible_jobs(self.service, principal, self.settings, owners=owners)

    # ------------------------------------------------------------------ one job, from the event loop
    async def job_body(self, jobid: str, principal: Principal) -> bytes:
        """One job's record as JSONResponse encodes it; HTTPException 400, 404 or 502 as `lookup` says."""
        record = detail_record(await access.lookup_async(self.jobs, jobid, principal, self.settings))
        return json.dumps(record, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()

    async def read_job_plainly(self, jobid: str, authorization: str) -> bytes | HTTPException | None:
        """GET /v1/jobs/{jobid} for broker/rest/fast_read.py, given a bearer token (or no authentication
        configured): the body or the lookup's error. None (the route answers, 401 and its challenge) for any
        other credentials."""
        async with self.reads_first.read():
            try:
                principal = self.auth.bearer_principal(authorization)
            except TokenError:
                return None
            if principal is None:
                return None
            try:
                return await self.job_body(jobid, principal)
            except HTTPException as exc:
                return exc


async def rest_state(request: Request) -> RestState:
    """The app's RestState (a dependency)."""
    state: RestState = request.app.state.rest
    return state


Rest = Annotated[RestState, Depends(rest_state)]
"""A route's parameter for the shared state: `def route(rest: Rest)`."""


def current_user(request: Request, rest: Rest) -> Principal:
    """The caller, or 401 with WWW-Authenticate (a plain `def` dependency: FastAPI runs it in a worker thread,
    where a password's bcrypt check belongs)."""
    return rest.auth.current_user(request)


User = Annotated[Principal, Depends(current_user)]
"""A route's parameter for the authenticated caller (the routes that declare it answer 401 before validating
their other parameters; the /v1/jobs routes authenticate in their bodies instead, after FastAPI's validation)."""
