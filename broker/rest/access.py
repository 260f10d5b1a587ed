"""Who may see which job: the one access rule of the REST API and the web pages (use these, never a copy).

In multi-user mode a user sees, cancels and reads the output of only their own jobs; the superuser sees all.
A job's owner is the REST user recorded in its jobspec at submit (`attributes.system.miniclusters.owner`, see
broker/jobs/info.py), which survives restarts and save/restore. Tenants need no Unix account on the lead: local
and Kubernetes pods run every job as the pod's one account, so ownership cannot be read from the uid. A job with
no recorded owner (submitted with `flux submit` inside the pod, or before owners were recorded) belongs to the
user whose Unix account on the lead has its uid, as in a real multi-user flux-core deployment; accounts below
FLUX_MIN_UID (root, daemons) never match, so a REST user named "root" does not see root's jobs.

Another user's job is answered exactly as a job that does not exist (same status, same body), so nobody can
learn which ids are in use.
"""

from __future__ import annotations

import os
import pwd
from dataclasses import replace

from fastapi import HTTPException
from starlette.concurrency import run_in_threadpool

from broker.client import FluxError
from broker.jobs.api import JobInfo
from broker.jobs.info import owned_by
from broker.jobs.jobid import JobIdError, parse_jobid
from broker.rest.jobs import JOB_LIST_LIMIT, AsyncJobService, JobService, SubmitRequest
from broker.rest.settings import RestSettings
from broker.rest.users import Principal

ENOENT = 2


def account_uid(name: str) -> int | None:
    """The uid of the Unix account with this name on the lead, None without one."""
    try:
        return pwd.getpwnam(name).pw_uid
    except KeyError:
        return None


def sees_everything(principal: Principal, settings: RestSettings) -> bool:
    """Single-user mode, a server without authentication, or the superuser: no job is hidden."""
    return settings.mode == "single-user" or not settings.require_auth or principal.is_superuser


def visible(principal: Principal, job: JobInfo, settings: RestSettings) -> bool:
    """Whether `principal` may see this job (and cancel it and read its output)."""
    owner = listing_owner(principal, settings)
    return owner is None or owned_by(job.owner, job.userid, *owner)


def listing_owner(principal: Principal, settings: RestSettings) -> tuple[str, int] | None:
    """None when the principal sees everything, else (name, uid) for owned_by: the uid of their account on the
    lead, -1 without one or when it is below FLUX_MIN_UID. The broker filters a pass-through listing by it."""
    if sees_everything(principal, settings):
        return None
    uid = account_uid(principal.name)
    return principal.name, uid if uid is not None and uid >= settings.min_uid else -1


def visible_jobs(
    service: JobService,
    principal: Principal,
    settings: RestSettings,
    limit: int = JOB_LIST_LIMIT,
    owners: bool = False,
) -> list[JobInfo]:
    """The jobs the principal may see among the newest `limit`, newest first (as the service lists them).

    Owners are read only where the rule needs them (or the caller shows them: `owners`), so a listing for
    someone who sees everything costs one listing call, not one jobspec read per job."""
    if sees_everything(principal, settings):
        return service.jobs(limit=limit, owners=owners)
    return [job for job in service.jobs(limit=limit) if visible(principal, job, settings)]


def not_found(jobid: str) -> HTTPException:
    """The one answer for a job that does not exist and for one that is not the caller's."""
    return HTTPException(404, f"there is no job {jobid}")


def job_number(jobid: str) -> int:
    """The id as a number, or HTTPException 400 naming it."""
    try:
        return parse_jobid(jobid)
    except JobIdError as exc:
        raise HTTPException(400, f"jobid: {exc}") from exc


def lookup_failed(jobid: str, exc: FluxError) -> HTTPException:
    """404 for a job the instance does not know, 502 when the instance does not answer."""
    if exc.errnum == ENOENT:
        return not_found(jobid)
    return HTTPException(502, f"the instance did not answer: {exc}")


def lookup(service: JobService, jobid: str, principal: Principal, settings: RestSettings) -> JobInfo:
    """The job, or HTTPException: 400 for a malformed id, 404 for a missing or invisible one, 502 when the
    instance does not answer."""
    number = job_number(jobid)
    try:
        job = service.info(number)
    except FluxError as exc:
        raise lookup_failed(jobid, exc) from None
    if not visible(principal, job, settings):
        raise not_found(jobid)
    return job


async def lookup_async(jobs: AsyncJobService, jobid: str, principal: Principal, settings: RestSettings) -> JobInfo:
    """`lookup`, awaited (the routes that answer from the event loop)."""
    number = job_number(jobid)
    try:
        job = await jobs.info(number)
    except FluxError as exc:
        raise lookup_failed(jobid, exc) from None
    if not (sees_everything(principal, settings) or await run_in_threadpool(visible, principal, job, settings)):
        raise not_found(jobid)  # (the rule may read the account database: in a thread)
    return job


async def visible_jobs_async(
    jobs: AsyncJobService, principal: Principal, settings: RestSettings, limit: int = JOB_LIST_LIMIT
) -> list[JobInfo]:
    """`visible_jobs`, awaited."""
    if sees_everything(principal, settings):
        return await jobs.jobs(limit=limit, owners=False)
    listed = await jobs.jobs(limit=limit)
    return await run_in_threadpool(lambda: [job for job in listed if visible(principal, job, settings)])


def run_as(principal: Principal, settings: RestSettings) -> int:
    """The uid a job runs as: the server's own in single-user mode and for tenants without an account on the
    lead (the pod's one account: isolation is then the API's); a user's own account where there is one."""
    if settings.mode == "single-user" or not settings.require_auth:
        return os.getuid()
    uid = account_uid(principal.name)
    if uid is None:
        return os.getuid()
    if uid < settings.min_uid and not principal.is_superuser:
        raise HTTPException(403, f"account {principal.name!r} (uid {uid}) may not run jobs")
    return uid


def submit_as(service: JobService, request: SubmitRequest, principal: Principal, settings: RestSettings) -> int:
    """Submit on the principal's behalf: as run_as's uid, with the principal recorded as the job's owner (so that
    `visible` finds it). Every submission from the API or the pages goes through here."""
    return service.submit(replace(request, owner=principal.name), run_as(principal, settings))


async def submit_as_async(
    jobs: AsyncJobService, request: SubmitRequest, principal: Principal, settings: RestSettings
) -> int:
    """`submit_as`, awaited; run_as reads the account database (in a thread) unless every job runs as us."""
    own = settings.mode == "single-user" or not settings.require_auth
    userid = os.getuid() if own else await run_in_threadpool(run_as, principal, settings)
    return await jobs.submit(replace(request, owner=principal.name), userid)
