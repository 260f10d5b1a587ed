"""The REST server's view of the instance: a narrow job service over the broker's JobClient.

Handles are not thread-safe and FastAPI serves requests from a thread pool, so each thread gets its own.
"""

from __future__ import annotations

import os
import shlex
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import hostlist

from broker import idset
from broker.jobs.api import JobClient, JobInfo

MAX_COMMAND_CHARS = 65536
# The server's own credentials never reach a job's environment.
PRIVATE_VARIABLES = frozenset({"FLUX_TOKEN", "FLUX_SECRET_KEY", "FLUX_TOKEN_SIGNING_KEY", "FLUX_USER"})


def job_environment(envars: Mapping[str, str], base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The server's environment (as flux-restful-api gives jobs) minus its secrets, plus the request's envars."""
    source = os.environ if base is None else base
    return {k: v for k, v in source.items() if k not in PRIVATE_VARIABLES} | dict(envars)


@dataclass(frozen=True)
class SubmitRequest:
    """A validated POST /v1/jobs/submit."""

    command: list[str]
    num_tasks: int = 1
    cores_per_task: int = 1
    gpus_per_task: int = 0
    num_nodes: int | None = None
    exclusive: bool = False
    option_flags: dict[str, Any] = field(default_factory=dict)
    envars: dict[str, str] = field(default_factory=dict)
    workdir: str = ""
    runtime: float = 0.0


class SubmitError(ValueError):
    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


def _as_int(name: str, value: Any, low: int, errors: list[str]) -> int | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        errors.append(f"{name}: must be an integer, got a boolean")
        return None
    try:
        number = int(value)
    except (TypeError, ValueError):
        errors.append(f"{name}: must be an integer, got {str(value)[:40]!r}")
        return None
    if number < low or number > 1_000_000:
        errors.append(f"{name}: must be between {low} and 1000000, got {number}")
        return None
    return number


def _as_bool(name: str, value: Any, errors: list[str]) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "1", "yes", "false", "0", "no", ""):
        return value.lower() in ("true", "1", "yes")
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    errors.append(f"exclusive: must be true or false, got {str(value)[:40]!r}")
    return False


def _pairs(name: str, value: Any, errors: list[str]) -> dict[str, str]:
    """`k=v,k=v` (query strings) or a JSON object."""
    if value is None or value == "":
        return {}
    if isinstance(value, Mapping):
        if all(isinstance(k, str) and isinstance(v, str | int | float | bool) for k, v in value.items()):
            return {k: str(v) for k, v in value.items()}
        errors.append(f"{name}: must map names to strings")
        return {}
    if isinstance(value, str):
        out = {}
        for item in filter(None, value.split(",")):
            key, sep, val = item.partition("=")
            if not sep or not key.strip():
                errors.append(f"{name}: expected k=v,k=v, got {item[:40]!r}")
                return {}
            out[key.strip()] = val
        return out
    errors.append(f"{name}: expected k=v,k=v or an object")
    return {}


def parse_submit(params: Mapping[str, Any]) -> SubmitRequest:
    """Validate submit parameters from a query string, a form or a JSON body; every error names its field."""
    errors: list[str] = []
    known = {
        "command", "num_tasks", "cores_per_task", "gpus_per_task", "num_nodes", "exclusive",
        "option_flags", "envars", "workdir", "runtime", "is_launcher",
    }  # fmt: skip
    for unknown in sorted(set(params) - known):
        errors.append(f"{unknown}: unknown parameter")
    raw = params.get("command")
    command: list[str] = []
    if isinstance(raw, list) and raw and all(isinstance(w, str) for w in raw):
        command = list(raw)
    elif isinstance(raw, str) and raw.strip():
        if len(raw) > MAX_COMMAND_CHARS:
            errors.append(f"command: longer than {MAX_COMMAND_CHARS} characters")
        else:
            try:
                command = shlex.split(raw)
            except ValueError as exc:
                errors.append(f"command: cannot be split into words ({exc})")
    else:
        errors.append("command: is required (a string or a list of strings)")
    if params.get("is_launcher"):
        errors.append("is_launcher: launcher jobs are not supported; submit the command itself")
    tasks = _as_int("num_tasks", params.get("num_tasks"), 1, errors)
    cores = _as_int("cores_per_task", params.get("cores_per_task"), 1, errors)
    gpus = _as_int("gpus_per_task", params.get("gpus_per_task"), 0, errors)
    nodes = _as_int("num_nodes", params.get("num_nodes"), 1, errors)
    runtime = _as_int("runtime", params.get("runtime"), 0, errors)
    exclusive = _as_bool("exclusive", params.get("exclusive", False), errors)
    if exclusive and nodes is None:
        errors.append("exclusive: needs num_nodes")
    workdir = params.get("workdir") or ""
    if not isinstance(workdir, str):
        errors.append("workdir: must be a string")
        workdir = ""
    options = _pairs("option_flags", params.get("option_flags"), errors)
    envars = _pairs("envars", params.get("envars"), errors)
    if errors:
        raise SubmitError(errors)
    return SubmitRequest(
        command=command,
        num_tasks=tasks or 1,
        cores_per_task=cores or 1,
        gpus_per_task=gpus or 0,
        num_nodes=nodes,
        exclusive=exclusive,
        option_flags=dict(options),
        envars=envars,
        workdir=workdir,
        runtime=float(runtime or 0),
    )


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
