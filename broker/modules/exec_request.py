"""The hand-off from the lead's job manager to a rank's job-exec: what to start there, typed.

Built once where a job starts (job_manager/executions.py), sent as `job-exec.start` (its JSON keeps the names
`id`, `gen`, `tasks` and `spec`), and read back in job_exec.py with every field checked, so the exec side reads
attributes rather than dict keys with defaults.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any, Literal, TypedDict, cast

from broker.errors import InputError
from broker.jobs.shapes import ShellOptions

Launch = Literal["tasks", "mpi", "broker"]
LAUNCHES: tuple[Launch, ...] = ("tasks", "mpi", "broker")


def _no_options() -> ShellOptions:
    return {}


class ExecRequestError(InputError):
    """A `job-exec.start` payload that is not a valid request (names the field)."""


class ExecSpec(TypedDict):
    """job-exec.start's `spec`: what every rank of the job is given."""

    command: list[str]
    userid: int
    env: dict[str, str]
    cwd: str
    size: int
    nnodes: int
    launch: str
    hosts: list[list[str | int]]
    ranks: list[int]
    cores: dict[str, list[int]]
    batch: dict[str, str]
    level: int
    mpirun_args: list[str]
    shell_options: ShellOptions


class ExecStart(TypedDict):
    """job-exec.start as the job manager sends it to one rank: the job, its generation, this rank's tasks."""

    id: int
    gen: int
    spec: ExecSpec
    tasks: list[int]


@dataclass(frozen=True)
class ExecRequest:
    """What the lead asks a rank to run for one job: its tasks, command, user and launch."""

    jobid: int
    gen: int
    """The job's attempt (its requeue count): reports of an older attempt are ignored by the lead."""
    tasks: tuple[int, ...]
    """This rank's task ranks (for a broker launch, its index among the job's ranks)."""
    command: tuple[str, ...]
    userid: int
    launch: Launch
    """"tasks": one process per task here; "mpi": mpirun on the first rank; "broker": a sub-instance broker."""
    size: int
    """Tasks in the whole job (FLUX_JOB_SIZE, mpirun -np)."""
    ranks: tuple[int, ...]
    """The job's broker ranks, in order."""
    hosts: tuple[tuple[str, int], ...]
    """(hostname, task count) of each of the job's ranks (the mpirun hostfile)."""
    cores: Mapping[int, tuple[int, ...]]
    """Cores allocated on each of the job's ranks."""
    env: Mapping[str, str] = field(default_factory=dict)
    """The job's environment; empty: the broker's own."""
    cwd: str = ""
    batch_script: str | None = None
    level: int = 0
    """The instance level of the broker that runs the job (a sub-instance's is one more)."""
    mpirun_args: tuple[str, ...] = ()
    shell_options: ShellOptions = field(default_factory=_no_options)

    @property
    def nnodes(self) -> int:
        return len(self.ranks)

    def to_payload(self) -> ExecStart:
        spec: ExecSpec = {
            "command": list(self.command),
            "userid": self.userid,
            "env": dict(self.env),
            "cwd": self.cwd,
            "size": self.size,
            "nnodes": self.nnodes,
            "launch": self.launch,
            "hosts": [[host, count] for host, count in self.hosts],
            "ranks": list(self.ranks),
            "cores": {str(rank): list(cores) for rank, cores in self.cores.items()},
            "batch": {} if self.batch_script is None else {"script": self.batch_script},
            "level": self.level,
            "mpirun_args": list(self.mpirun_args),
            "shell_options": self.shell_options.copy(),
        }
        return {"id": self.jobid, "gen": self.gen, "spec": spec, "tasks": list(self.tasks)}

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> ExecRequest:
        """Read a `job-exec.start` payload; ExecRequestError names the first field that is wrong."""
        if isinstance(payload, LocalExecStart):
            return payload.request  # built by the job manager of this broker, typed: nothing to decode
        spec = _get(payload, "spec", dict)
        launch = spec.get("launch", "tasks")
        if launch not in LAUNCHES:
            raise ExecRequestError(f"spec.launch: {launch!r} is not one of {', '.join(LAUNCHES)}")
        command = _strings(spec, "spec", "command")
        if not command:
            raise ExecRequestError("spec.command: must not be empty")
        hosts = []
        for entry in _get(spec, "hosts", list, "spec."):
            if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str) and _int(entry[1])):
                raise ExecRequestError(f"spec.hosts: {entry!r} is not [hostname, task count]")
            hosts.append((entry[0], int(entry[1])))
        cores = {}
        for key, value in _get(spec, "cores", dict, "spec.").items():
            if not (str(key).isdigit() and isinstance(value, list) and all(_int(c) for c in value)):
                raise ExecRequestError(f"spec.cores: {key!r}: {value!r} is not a rank's list of cores")
            cores[int(key)] = tuple(value)
        env = spec.get("env") or {}
        if not (isinstance(env, dict) and _all_strings(env) and _all_strings(env.values())):
            raise ExecRequestError("spec.env: must map names to strings")
        batch = spec.get("batch") or {}
        script = batch.get("script") if isinstance(batch, dict) else None
        options = spec.get("shell_options") or {}
        if not isinstance(options, dict):
            raise ExecRequestError("spec.shell_options: must be a mapping")
        args = spec.get("mpirun_args") or []
        if not isinstance(args, list):
            raise ExecRequestError("spec.mpirun_args: must be a list")
        return cls(
            jobid=_get(payload, "id", int),
            gen=int(payload.get("gen", 0)),
            tasks=tuple(_ints(payload, "", "tasks")),
            command=tuple(command),
            userid=_get(spec, "userid", int, "spec."),
            launch=cast(Launch, launch),
            size=_get(spec, "size", int, "spec."),
            ranks=tuple(_ints(spec, "spec.", "ranks")),
            hosts=tuple(hosts),
            cores=cores,
            env=env,
            cwd=str(spec.get("cwd") or ""),
            batch_script=script if isinstance(script, str) else None,
            level=int(spec.get("level") or 0),
            mpirun_args=tuple(str(a) for a in args),
            shell_options=cast("ShellOptions", options),  # a mapping: each option is checked where it is read
        )


class LocalExecStart(dict[str, object]):
    """job-exec.start's payload when the job manager starts a job on its own broker: the typed request rides along
    and job-exec reads it as it is, without a round trip through the payload's dicts (to_payload, then every field
    checked again in from_payload: about 30 us of the 0.2 ms from one job's end to the next one's start, issue 45).
    A local request is never encoded; as a dict it holds the job, its generation and this rank's tasks."""

    def __init__(self, request: ExecRequest) -> None:
        super().__init__(id=request.jobid, gen=request.gen, tasks=list(request.tasks))
        self.request = request


def _all_strings(values: Iterable[object]) -> bool:
    """Every value a str (checked in C: a job's environment has dozens, and every job start reads one)."""
    return all(map(isinstance, values, repeat(str)))


def _int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _get(data: Mapping[str, Any], key: str, kind: type, where: str = "") -> Any:
    value = data.get(key)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ExecRequestError(f"{where}{key}: expected {kind.__name__}, got {value!r}")
    return value


def _ints(data: Mapping[str, Any], where: str, key: str) -> list[int]:
    values = _get(data, key, list, where)
    if not all(_int(v) for v in values):
        raise ExecRequestError(f"{where}{key}: expected a list of integers, got {values!r}")
    return [int(v) for v in values]


def _strings(data: Mapping[str, Any], where: str, key: str) -> list[str]:
    values = _get(data, key, list, f"{where}.")
    if not all(isinstance(v, str) for v in values):
        raise ExecRequestError(f"{where}.{key}: expected a list of strings, got {values!r}")
    return [str(v) for v in values]
