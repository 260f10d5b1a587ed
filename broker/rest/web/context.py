"""What the pages need from the REST app: the same settings, service, users and rules as `/v1`.

The access rule and authentication are passed in (not re-implemented), so the pages and the API can never
disagree on who may see a job (broker/rest/app.py: web_context binds them to the API's RestState). mount_web
keeps the context at `app.state.web`; the page routers reach it through the `Web` dependency.
"""

# No `from __future__ import annotations`: FastAPI reads `web_context`'s parameter from its annotation at runtime.

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from broker.jobs.api import JobInfo
from broker.rest.jobs import JobService, SubmitRequest
from broker.rest.settings import RestSettings
from broker.rest.users import Principal, UserStore

Authenticate = Callable[[Request], Principal]
"""The API's own dependency: a Principal, or HTTPException 401 (the pages hand it the session cookie's token)."""
Visible = Callable[[Principal, JobInfo], bool]
"""May this user see (read, read the output of) this job: the API's rule."""
SubmitAs = Callable[[Principal, SubmitRequest], int]
"""Submit on a user's behalf, recording them as the job's owner (HTTPException 403 when they may not run jobs)."""
VisibleJobs = Callable[[Principal, bool], list[JobInfo]]
"""The jobs this user may see, newest first; with True, each with its owner filled in (for an owner column)."""


@dataclass(frozen=True)
class WebContext:
    settings: RestSettings
    service: JobService
    users: UserStore
    authenticate: Authenticate
    visible: Visible
    submit: SubmitAs
    visible_jobs: VisibleJobs


async def web_context(request: Request) -> WebContext:
    """The app's WebContext (a dependency; `async def`: no worker-thread hand-off to find it)."""
    context: WebContext = request.app.state.web
    return context


Web = Annotated[WebContext, Depends(web_context)]
"""A page's parameter for the context: `def page(request: Request, context: Web)`."""
