"""The REST API's JobService over a real Flux instance, through the flux-python bindings (the "flux" flavour).

`flux` is imported lazily (in FluxJobService.__init__), so this package never needs flux-core installed. Every call
below is one of flux-core's public Python bindings (src/bindings/python/flux/...):

    submit    flux.job.JobspecV1.from_command + duration/cwd/environment setters + setattr_shell_option
              (job/Jobspec.py), flux.job.submit (job/submit.py)
    jobs      flux.job.job_list(h, max_entries=N, userid=FLUX_USERID_UNKNOWN).get_jobs() -> job-list's raw
              records, newest first (job/list.py), mapped by job_info_from_list (flux_records.py)
    info      flux.job.job_list_id(h, jobid).get_job() -> the same record, FileNotFoundError for an unknown job
    owner     flux.job.job_info_lookup(h, jobid, keys=["jobspec"]) (job/kvslookup.py): job-list does not report
              our attribute, so the jobspec is read, only where an owner is needed, all of a listing's at once
              (every request sent, then every answer read), and remembered (a jobspec never changes)
    gpus      flux.resource.resource_list(h).get().all.ngpus (resource/list.py), only for a GPU request
    cancel    flux.job.cancel(h, jobid, reason) (job/kill.py)
    output    flux.job.job_kvs_lookup(h, jobid, keys=["guest.output"]) (job/kvslookup.py): the RFC 24 output
              eventlog as it stands now, parsed with flux.job.EventLogEvent (job/event.py) and decoded as
              flux.job.output.OutputEvent does (base64 "encoding", "repeat"). This is the call
              flux.job.job_output(..., nowait=True) makes (job/output.py); we use it directly to keep stdout and
              stderr interleaved in eventlog order. wait=True polls it until there are new complete lines or the
              job is inactive (at which point the eventlog is final).
    nodes     flux.resource.resource_list(h).get().up.nodelist (resource/list.py, resource/ResourceSet.py)
    shutdown  h.rpc("shutdown.start", {"loglevel": LOG_WARNING}) as `flux shutdown --background --quiet` sends it
              (src/cmd/builtin/shutdown.c; Flux.rpc in core/handle.py)

Flux reports errors as OSError(errno, strerror); they become broker.client.FluxError so the app answers as it does
for the built-in flavour (ENOENT -> 404). Tested against real flux-core 0.88 (tests/rest/test_rest_flux_flavour.py).

A flux.Flux handle is not thread-safe and every call here blocks, so the app calls this service from worker
threads only, each with its own handle (broker/rest/per_thread.py): concurrent requests reach flux-core
concurrently, as they do through flux-restful, and a slow submit holds up no other request.
"""

from __future__ import annotations

import base64
import errno
import importlib
import os
import threading
import time
from typing import Any

from broker.client import FluxError
from broker.jobs.api import JobInfo
from broker.jobs.info import job_owner
from broker.rest.answers import EventRecord, OutputContext
from broker.rest.async_flux import FluxLoopJobs
from broker.rest.flux_records import job_info_from_list
from broker.rest.jobs import JOB_LIST_LIMIT, SubmitRequest, job_command, job_environment, system_attributes
from broker.rest.per_thread import PerThread
from broker.rest.submit import check_gpus

LOG_WARNING = 4  # syslog level; what `flux shutdown --quiet` passes as "loglevel"
POLL_INTERVAL = 0.25
LONG_POLL_SECONDS = 25.0
OWNER_BATCH = 256  # jobspec reads in flight at once when a listing needs owners
OWNER_CACHE = 100_000  # remembered owners (an int and a short string each); forgotten all at once past this


def _flux_error(exc: OSError, what: str) -> FluxError:
    number = exc.errno or errno.EIO
    return FluxError(number, f"{what}: {exc.strerror or exc}")


def _event_data(context: OutputContext) -> str:
    """The text of an RFC 24 "data" event, decoded as flux.job.output.OutputEvent does (job/output.py)."""
    data = context.get("data")
    if not isinstance(data, str):
        return ""
    if context.get("encoding") == "base64":
        data = base64.b64decode(data).decode("utf-8", errors="surrogateescape")
    repeat = context.get("repeat")
    if isinstance(repeat, int) and repeat > 1:
        data *= repeat
    return data


class FluxJobService:
    """JobService over flux-core through flux-python; one flux.Flux handle per worker thread."""

    def __init__(self, uri: str | None = None) -> None:
        self.flux = import_flux()  # fails here, at start-up, when the bindings are missing
        self.uri = uri
        # flux.Flux has no close(): a handle closes when collected, so dropping it is closing it
        self._handles: PerThread[Any] = PerThread(self._connect, lambda handle: None)
        self._owners: dict[int, str] = {}
        self._owners_lock = threading.Lock()
        self.environment = dict(os.environ)  # what jobs are given (job_environment), read once
        self.asynchronous = FluxLoopJobs(self)  # what the hot routes await on the loop (broker/rest/jobs.py)

    def _connect(self) -> Any:
        try:
            return self.flux.Flux(self.uri) if self.uri else self.flux.Flux()
        except OSError as exc:
            raise _flux_error(exc, f"cannot connect to {self.uri or '$FLUX_URI'}") from exc

    @property
    def handle(self) -> Any:
        return self._handles.get()

    def gpus(self) -> int:
        """How many GPUs the instance has (up or down: a down node may come back)."""
        try:
            return int(self.flux.resource.resource_list(self.handle).get().all.ngpus)
        except OSError as exc:
            raise _flux_error(exc, "cannot list resources") from exc

    def submit(self, request: SubmitRequest, userid: int) -> int:
        if userid != os.getuid():
            raise FluxError(
                errno.EPERM,
                f"cannot submit as uid {userid}: the flux flavour submits with the server's own credentials "
                f"(uid {os.getuid()}); running jobs as other users needs flux-security signing (multi-user mode "
                "is only supported by the built-in flavour)",
            )
        try:
            jobspec = self.flux.job.JobspecV1.from_command(
                command=list(request.command),
                num_tasks=max(request.num_tasks, request.num_nodes or 1),
                cores_per_task=request.cores_per_task,
                gpus_per_task=request.gpus_per_task or None,
                num_nodes=request.num_nodes,
                exclusive=request.exclusive,
            )
            jobspec.duration = request.runtime
            jobspec.cwd = request.workdir or os.getcwd()
            jobspec.environment = job_environment(request.envars, self.environment)
            for key, value in request.option_flags.items():
                jobspec.setattr_shell_option(key, value)
            for key, value in system_attributes(request).items():
                jobspec.setattr(f"system.{key}", value)
        except (TypeError, ValueError) as exc:
            raise FluxError(errno.EINVAL, f"invalid job request: {exc}") from exc
        if request.gpus_per_task:
            check_gpus(request, self.gpus())  # flux-core would take the job and then never run it
        try:
            jobid = int(self.flux.job.submit(self.handle, jobspec))
        except OSError as exc:
            raise _flux_error(exc, "submit failed") from exc
        self._remember({jobid: request.owner})
        return jobid

    def jobs(self, limit: int = JOB_LIST_LIMIT, owners: bool = True) -> list[JobInfo]:
        everyone = self.flux.constants.FLUX_USERID_UNKNOWN
        try:
            listed = self.flux.job.job_list(self.handle, max_entries=limit, userid=everyone).get_jobs()
        except OSError as exc:
            raise _flux_error(exc, "cannot list jobs") from exc
        now = time.time()
        found = [job_info_from_list(record, now) for record in listed]
        return self._owned(found) if owners else found

    def info(self, jobid: int) -> JobInfo:
        try:
            record = self.flux.job.job_list_id(self.handle, jobid).get_job()
        except FileNotFoundError:
            raise FluxError(errno.ENOENT, f"job {jobid} does not exist") from None
        except OSError as exc:
            raise _flux_error(exc, f"cannot look up job {jobid}") from exc
        return self._owned([job_info_from_list(record)])[0]

    def known_owner(self, jobid: int) -> str | None:
        """Who submitted the job, when already read or submitted here; None when its jobspec must be read."""
        with self._owners_lock:
            return self._owners.get(jobid)

    def remember_owner(self, jobid: int, owner: str) -> None:
        self._remember({jobid: owner})

    def _remember(self, owners: dict[int, str]) -> None:
        with self._owners_lock:
            if len(self._owners) + len(owners) > OWNER_CACHE:
                self._owners.clear()
            self._owners.update(owners)

    def _owned(self, jobs: list[JobInfo]) -> list[JobInfo]:
        """The jobs with their owners from their jobspecs: flux-core's job-list does not report our attribute.

        A jobspec never changes, so each is read once and remembered; the ones not known yet are read together,
        every request sent before any answer is awaited, so a listing waits about one round trip, not one each.
        """
        with self._owners_lock:
            known = dict(self._owners)
        missing = [job.id for job in jobs if job.id not in known]
        for start in range(0, len(missing), OWNER_BATCH):
            batch = missing[start : start + OWNER_BATCH]
            pending = [(jobid, self.flux.job.job_info_lookup(self.handle, jobid, keys=["jobspec"])) for jobid in batch]
            read: dict[int, str] = {}
            for jobid, future in pending:
                try:
                    spec = future.get_decode().get("jobspec")
                except OSError as exc:
                    if exc.errno == errno.ENOENT:  # purged meanwhile: nobody's (only the superuser sees it)
                        continue
                    raise _flux_error(exc, f"cannot read the jobspec of job {jobid}") from exc
                read[jobid] = job_owner(spec) if isinstance(spec, dict) else ""
            self._remember(read)
            known.update(read)
        return [job._replace(owner=known.get(job.id, "")) for job in jobs]

    def command(self, jobid: int) -> list[str]:
        """The job's command, from its jobspec (the web page shows it; not part of the API's JobService)."""
        try:
            found = self.flux.job.job_kvs_lookup(self.handle, jobid, keys=["jobspec"])
        except OSError as exc:
            raise _flux_error(exc, f"cannot read the jobspec of job {jobid}") from exc
        spec = found.get("jobspec") if found else None
        return job_command(spec) if isinstance(spec, dict) else []

    def cancel(self, jobid: int) -> None:
        try:
            self.flux.job.cancel(self.handle, jobid, "canceled through the REST API")
        except OSError as exc:
            # flux-core answers ENOENT ("job is inactive") for a finished job too; that job exists, and the
            # built-in flavour calls it an invalid request (400), not a missing one (404).
            if exc.errno == errno.ENOENT and not self.info(jobid).active:
                raise FluxError(errno.EINVAL, f"cannot cancel job {jobid}: job is inactive") from exc
            raise _flux_error(exc, f"cannot cancel job {jobid}") from exc

    def _output_text(self, jobid: int) -> str:
        """All output data so far, stdout and stderr in eventlog order ("" before the job writes any)."""
        try:
            found = self.flux.job.job_kvs_lookup(self.handle, jobid, keys=["guest.output"])
        except OSError as exc:
            raise _flux_error(exc, f"cannot read the output of job {jobid}") from exc
        if not found or not isinstance(found.get("guest.output"), str):
            return ""  # no output eventlog yet (job_output(nowait=True) raises FileNotFoundError here)
        chunks = []
        for entry in found["guest.output"].splitlines():
            if not entry.strip():
                continue
            event = self.flux.job.EventLogEvent(entry)
            if event.name == "data":
                chunks.append(_event_data(event.context))
        return "".join(chunks)

    def eventlog(self, jobid: int) -> list[EventRecord]:
        """The job's main eventlog (the KVS key `eventlog`, RFC 21) as the web page shows it."""
        try:
            found = self.flux.job.job_kvs_lookup(self.handle, jobid, keys=["eventlog"])
        except OSError as exc:
            raise _flux_error(exc, f"cannot read the eventlog of job {jobid}") from exc
        text = found.get("eventlog") if found else None
        events = []
        for entry in (text if isinstance(text, str) else "").splitlines():
            if entry.strip():
                event = self.flux.job.EventLogEvent(entry)
                events.append(EventRecord(timestamp=event.timestamp, name=event.name, context=dict(event.context)))
        return events

    def output(self, jobid: int, offset: int = 0, wait: bool = False) -> tuple[list[str], int, bool]:
        deadline = time.monotonic() + LONG_POLL_SECONDS
        while True:
            # Read the state first: once the job is inactive its output eventlog is final.
            done = not self.info(jobid).active
            lines = self._output_text(jobid).splitlines(keepends=True)
            if not done and lines and not lines[-1].endswith("\n"):
                lines.pop()  # hold a partial line back until it is complete, so offsets stay stable
            new = lines[offset:]
            if new or done or not wait or time.monotonic() >= deadline:
                return new, offset + len(new), done
            time.sleep(POLL_INTERVAL)

    def nodes(self) -> list[str]:
        try:
            resources = self.flux.resource.resource_list(self.handle).get()
        except OSError as exc:
            raise _flux_error(exc, "cannot list resources") from exc
        return [str(host) for host in resources.up.nodelist]

    def shutdown(self) -> None:
        try:
            self.handle.rpc("shutdown.start", {"loglevel": LOG_WARNING}).get()
        except OSError as exc:
            raise _flux_error(exc, "shutdown failed") from exc

    def close(self) -> None:
        self._handles.close()
        self.asynchronous.close()


def import_flux() -> Any:
    """The flux-python package with flux.job and flux.resource loaded (ImportError without flux-core)."""
    package = importlib.import_module("flux")
    importlib.import_module("flux.job")
    importlib.import_module("flux.resource")
    return package
