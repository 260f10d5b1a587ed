"""What the pages need from the REST app: the same settings, service, users and rules as `/v1`.

The access rule and authentication are passed in (not re-implemented), so the pages and the API can never
disagree on who may see a job; when the rule moves to its own module, app.py passes that one instead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from fastapi import Request

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
