"""The REST server's view of the instance: a narrow job service over the broker's JobClient.

Handles are not thread-safe and FastAPI serves requests from a thread pool, so each thread gets its own.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping
from typing import Protocol

import hostlist

from broker import idset
from broker.jobs.api import JobClient, JobInfo
from broker.rest.submit import SubmitError as SubmitError  # re-exported: services and tests import them from here
from broker.rest.submit import SubmitRequest as SubmitRequest
from broker.rest.submit import parse_submit as parse_submit

# The server's own credentials never reach a job's environment.
PRIVATE_VARIABLES = frozenset({"FLUX_TOKEN", "FLUX_SECRET_KEY", "FLUX_TOKEN_SIGNING_KEY", "FLUX_USER"})


def job_environment(envars: Mapping[str, str], base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The server's environment (as flux-restful-api gives jobs) minus its secrets, plus the request's envars."""
    source = os.environ if base is None else base
    return {k: v for k, v in source.items() if k not in PRIVATE_VARIABLES} | dict(envars)


def system_attributes(request: SubmitRequest) -> dict[str, object]:
    """The jobspec's attributes.system entries a REST submit adds: burstable, and the owner (broker/rest/access.py)."""
    system: dict[str, object] = {"burstable": 1} if request.burstable else {}
    if request.owner:
        system["miniclusters"] = {"owner": request.owner}
    return system


class JobService(Protocol):
    """What the REST API needs from an instance (the flux flavour would implement it with flux-python)."""

    def submit(self, request: SubmitRequest, userid: int) -> int: ...
    def jobs(self) -> list[JobInfo]: ...
    def info(self, jobid: int) -> JobInfo: ...
    def cancel(self, jobid: int) -> None: ...
    def output(self, jobid: int, offset: int = 0, wait: bool = False) -> tuple[list[str], int, bool]: ...
    def nodes(self) -> list[str]: ...
    def shutdown(self) -> None: ...


class BrokerJobService:
    """JobService over the built-in broker, one JobClient per thread."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self._local = threading.local()
        self._clients: list[JobClient] = []
        self._lock = threading.Lock()

    @property
    def client(self) -> JobClient:
        client: JobClient | None = getattr(self._local, "client", None)
        if client is None:
            client = JobClient(self.uri)
            self._local.client = client
            with self._lock:
                self._clients.append(client)
        return client

    def submit(self, request: SubmitRequest, userid: int) -> int:
        return self.client.submit(
            command=request.command,
            ntasks=max(request.num_tasks, request.num_nodes or 1),
            nnodes=request.num_nodes,
            cores_per_task=request.cores_per_task,
            exclusive=request.exclusive,
            duration=request.runtime,
            environment=job_environment(request.envars),
            cwd=request.workdir,
            shell_options=request.option_flags or None,
            system_attributes=system_attributes(request) or None,
            userid=userid,
        )

    def jobs(self) -> list[JobInfo]:
        return self.client.jobs("all")

    def info(self, jobid: int) -> JobInfo:
        return self.client.info(jobid)

    def cancel(self, jobid: int) -> None:
        self.client.cancel(jobid, note="canceled through the REST API")

    def output(self, jobid: int, offset: int = 0, wait: bool = False) -> tuple[list[str], int, bool]:
        lines, next_offset, done = self.client.output(jobid, offset, wait=wait)
        return [line.text for line in lines], next_offset, done

    def eventlog(self, jobid: int) -> list[dict[str, object]]:
        """The job's eventlog so far (the web page shows it; not part of the API's JobService)."""
        return list(self.client.events(jobid, follow=False))

    def nodes(self) -> list[str]:
        status = self.client.resources()
        hostnames: list[str] = status.get("hostnames", [])
        return [hostnames[rank] for rank in idset.decode(status.get("up", "")) if rank < len(hostnames)]

    def shutdown(self) -> None:
        self.client.handle.rpc("broker.shutdown", {}, 0, 10.0)

    def close(self) -> None:
        with self._lock:
            for client in self._clients:
                client.close()
            self._clients.clear()


def stream_lines(service: JobService, jobid: int) -> Iterator[str]:
    """Output lines as they arrive, until the job is done (long-polls the lead)."""
    offset, done = 0, False
    while not done:
        lines, offset, done = service.output(jobid, offset, wait=True)
        for line in lines:
            yield line if line.endswith("\n") else line + "\n"


def compact_nodelist(names: list[str]) -> str:
    return str(hostlist.collect_hostlist(names)) if names else ""
