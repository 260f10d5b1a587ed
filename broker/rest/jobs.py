"""The REST server's view of the instance: a narrow job service over the broker's JobClient.

Every call here blocks, so the app makes them from worker threads only (never on the event loop); handles are
not thread-safe, so each worker thread gets its own (broker/rest/per_thread.py says why).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, NotRequired, Protocol, TypedDict, cast

import hostlist
from starlette.concurrency import run_in_threadpool

from broker.errors import FluxError
from broker.jobs.api import JobClient, JobInfo
from broker.jobs.build import build_jobspec
from broker.jobs.shapes import Jobspec
from broker.jobs.states import ACTIVE, JobState
from broker.rest.answers import EventRecord
from broker.rest.per_thread import PerThread
from broker.rest.submit import SubmitError as SubmitError  # re-exported: services and tests import them from here
from broker.rest.submit import SubmitRequest as SubmitRequest
from broker.rest.submit import check_gpus
from broker.rest.submit import parse_submit as parse_submit
from common import idset

if TYPE_CHECKING:
    from broker.jobs.shapes import Jobspec

JOB_LIST_LIMIT = 1000
"""How many jobs a listing holds unless asked otherwise: flux-core's job-list default (flux.job.JobList's
max_entries), which the reference server lists with; newest first, so the oldest inactive ones drop off."""
STREAM_POLL_SECONDS = 0.25
LISTING_PREFIX = b'{"jobs":'  # job-manager.list's answer around the listing the REST API passes on
EPROTO = 71

# The server's own credentials never reach a job's environment.
PRIVATE_VARIABLES = frozenset({"FLUX_TOKEN", "FLUX_SECRET_KEY", "FLUX_TOKEN_SIGNING_KEY", "FLUX_USER"})


def job_environment(envars: Mapping[str, str], base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The server's environment (as flux-restful-api gives jobs) minus its secrets, plus the request's envars.

    The services pass `base`, their snapshot of the environment taken when they start (`dict(os.environ)`):
    reading os.environ decodes every variable on every read, which was a third of a submit's work here."""
    source = os.environ if base is None else base
    return {k: v for k, v in source.items() if k not in PRIVATE_VARIABLES} | dict(envars)


class SystemAttributes(TypedDict, total=False):
    """The jobspec's attributes.system entries a REST submit adds."""

    burstable: int
    miniclusters: dict[str, str]


def system_attributes(request: SubmitRequest) -> SystemAttributes:
    """The jobspec's attributes.system entries a REST submit adds: burstable, and the owner (broker/rest/access.py)."""
    system = SystemAttributes(burstable=1) if request.burstable else SystemAttributes()
    if request.owner:
        system["miniclusters"] = {"owner": request.owner}
    return system


def job_command(jobspec: object) -> list[str]:
    """The command of a jobspec (RFC 14: tasks[0].command), [] when it has none (or it is no jobspec: what a
    broker answers is read, not trusted)."""
    tasks = jobspec.get("tasks") if isinstance(jobspec, dict) else None
    command = tasks[0].get("command") if isinstance(tasks, list) and tasks and isinstance(tasks[0], dict) else None
    return [str(word) for word in command] if isinstance(command, list) else []


class ListOwner(TypedDict):
    name: str
    uid: int


class ListRequest(TypedDict):
    """`job-manager.list` as the detailed listing asks it: rendered by the broker as GET /v1/jobs answers."""

    states: int
    max_entries: int
    view: str
    keyed: bool
    owner: NotRequired[ListOwner]


class JobService(Protocol):
    """What the REST API needs from an instance: BrokerJobService (built-in) and FluxJobService (flux-core).

    `jobs(owners=False)` lets a service skip reading who submitted each job (JobInfo.owner) when the caller
    sees every job anyway; with the default, every job's owner is filled in, so access checks are always safe.
    """

    def submit(self, request: SubmitRequest, userid: int) -> int: ...
    def jobs(self, limit: int = JOB_LIST_LIMIT, owners: bool = True) -> list[JobInfo]: ...
    def info(self, jobid: int) -> JobInfo: ...
    def cancel(self, jobid: int) -> None: ...
    def output(self, jobid: int, offset: int = 0, wait: bool = False) -> tuple[list[str], int, bool]: ...
    def nodes(self) -> list[str]: ...
    def shutdown(self) -> None: ...


def broker_jobspec(request: SubmitRequest, environment: Mapping[str, str] | None = None) -> Jobspec:
    """The jobspec the built-in broker gets for a REST submit (both of BrokerJobService's paths build it here);
    `environment` is the server's (job_environment's `base`)."""
    check_gpus(request, 0)  # the built-in broker schedules no GPUs: refuse rather than ignore the request
    spec = build_jobspec(
        request.command,
        ntasks=max(request.num_tasks, request.num_nodes or 1),
        nnodes=request.num_nodes,
        cores_per_task=request.cores_per_task,
        exclusive=request.exclusive,
        duration=request.runtime,
        cwd=request.workdir,
        environment=job_environment(request.envars, environment),
        shell_options=request.option_flags or None,
        system_attributes=dict(system_attributes(request)) or None,
    )
    return spec


class AsyncJobService(Protocol):
    """The calls the hot routes (one job, the listing, submit) await on the event loop: BrokerJobs awaits the
    built-in broker there (broker/rest/async_broker.py says why); InThreads runs any JobService's blocking
    calls in worker threads (the flux flavour, whose handles block)."""

    async def submit(self, request: SubmitRequest, userid: int) -> int: ...
    async def jobs(self, limit: int = JOB_LIST_LIMIT, owners: bool = True) -> list[JobInfo]: ...
    async def info(self, jobid: int) -> JobInfo: ...


class InThreads:
    """AsyncJobService over a blocking JobService: each call in a worker thread, never on the loop."""

    def __init__(self, service: JobService) -> None:
        self.service = service

    async def submit(self, request: SubmitRequest, userid: int) -> int:
        return await run_in_threadpool(self.service.submit, request, userid)

    async def jobs(self, limit: int = JOB_LIST_LIMIT, owners: bool = True) -> list[JobInfo]:
        return await run_in_threadpool(self.service.jobs, limit, owners)

    async def info(self, jobid: int) -> JobInfo:
        return await run_in_threadpool(self.service.info, jobid)


class BrokerJobs:
    """AsyncJobService over the built-in broker: RPCs awaited on the event loop, no worker thread."""

    def __init__(self, uri: str, environment: Mapping[str, str] | None = None) -> None:
        from broker.rest.async_broker import AsyncBrokerJobs

        self.broker = AsyncBrokerJobs(uri)
        self.environment = dict(os.environ) if environment is None else environment

    async def submit(self, request: SubmitRequest, userid: int) -> int:
        return await self.broker.submit_jobspec(broker_jobspec(request, self.environment), userid)

    async def jobs(self, limit: int = JOB_LIST_LIMIT, owners: bool = True) -> list[JobInfo]:
        return await self.broker.jobs(limit, owners)

    async def info(self, jobid: int) -> JobInfo:
        return await self.broker.info(jobid)

    def close(self) -> None:
        self.broker.close()


def asynchronous(service: JobService) -> AsyncJobService:
    """The service's own event-loop calls when it has them (the built-in broker), else its calls in threads."""
    own = getattr(service, "asynchronous", None)
    return own if own is not None else InThreads(service)


class BrokerJobService:
    """JobService over the built-in broker, one JobClient per thread; `asynchronous` awaits it on the loop."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self._clients: PerThread[JobClient] = PerThread(lambda: JobClient(self.uri), JobClient.close)
        self.environment = dict(os.environ)  # what jobs are given (job_environment), read once
        self.asynchronous = BrokerJobs(uri, self.environment)

    @property
    def client(self) -> JobClient:
        return self._clients.get()

    def submit(self, request: SubmitRequest, userid: int) -> int:
        spec = broker_jobspec(request, self.environment)
        return self.client.submit(spec, userid=userid)

    def jobs(self, limit: int = JOB_LIST_LIMIT, owners: bool = True) -> list[JobInfo]:
        return self.client.jobs("all", max_entries=limit)  # the owner comes with each job here, at no cost

    def info(self, jobid: int) -> JobInfo:
        return self.client.info(jobid)

    def restful_listing(self, limit: int, keyed: bool, owner: tuple[str, int] | None) -> bytes:
        """The detailed listing as the JSON text GET /v1/jobs answers, rendered by the broker and passed on
        undecoded (issue 27: 5,000 jobs in under 100 ms). The same records and order as `jobs` with
        detail_record, and the same access rule (`owner`: access.listing_owner)."""
        payload = ListRequest(states=int(ACTIVE | JobState.INACTIVE), max_entries=limit, view="restful", keyed=keyed)
        if owner is not None:
            payload["owner"] = ListOwner(name=owner[0], uid=owner[1])
        handle = self.client.handle
        answer: bytes = handle.rpc_raw("job-manager.list", payload)  # type: ignore[attr-defined]
        if not (answer.startswith(LISTING_PREFIX) and answer.endswith(b"}")):
            raise FluxError(EPROTO, f"job-manager.list answered {answer[:80]!r}")
        return answer[len(LISTING_PREFIX) : -1]

    def cancel(self, jobid: int) -> None:
        self.client.cancel(jobid, note="canceled through the REST API")

    def output(self, jobid: int, offset: int = 0, wait: bool = False) -> tuple[list[str], int, bool]:
        lines, next_offset, done = self.client.output(jobid, offset, wait=wait)
        return [line.text for line in lines], next_offset, done

    def command(self, jobid: int) -> list[str]:
        """The job's command, from its jobspec (the web page shows it; not part of the API's JobService)."""
        return job_command(self.client.jobspec(jobid))

    def eventlog(self, jobid: int) -> list[EventRecord]:
        """The job's eventlog so far (the web page shows it; not part of the API's JobService)."""
        return [cast(EventRecord, event) for event in self.client.events(jobid, follow=False)]

    def nodes(self) -> list[str]:
        status = self.client.resources()
        hostnames: list[str] = status.get("hostnames", [])
        return [hostnames[rank] for rank in idset.decode(status.get("up", "")) if rank < len(hostnames)]

    def shutdown(self) -> None:
        self.client.handle.rpc("broker.shutdown", {}, 0, 10.0)

    def close(self) -> None:
        self._clients.close()
        self.asynchronous.close()


async def stream_lines(service: JobService, jobid: int) -> AsyncIterator[str]:
    """Output lines as they arrive, until the job is done.

    Each look is a short call in a worker thread, and the waits between looks are on the event loop: an open
    stream holds no thread while its job is quiet, so many watchers cannot use up the pool other requests need.
    """
    offset, done = 0, False
    while not done:
        lines, offset, done = await run_in_threadpool(service.output, jobid, offset)
        for line in lines:
            yield line if line.endswith("\n") else line + "\n"
        if not lines and not done:
            await asyncio.sleep(STREAM_POLL_SECONDS)


def compact_nodelist(names: list[str]) -> str:
    return str(hostlist.collect_hostlist(names)) if names else ""
