"""POST /v1/jobs/submit parameters: one pydantic model for the query string, a form and a JSON body.

Clients send the same fields in three spellings: the upstream Python client puts them in the query string
(numbers as text, `option_flags` as `k=v,k=v`, `envars` as a Python dict literal because httpx formats a dict
with str()), and retries with a JSON body after a 401; the web form posts them as a form. Every field is
validated strictly (no silent truncation of 1.5, no overflow on 1e309 or Infinity) and every error names its field.
"""

from __future__ import annotations

import ast
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator

from broker.errors import InputError
from broker.rest.json_types import JsonObject
from broker.rest.messages import error_lines

MAX_COMMAND_CHARS = 65536
MAX_COUNT = 1_000_000
MAX_RUNTIME_SECONDS = 10 * 365 * 24 * 3600


@dataclass(frozen=True)
class SubmitRequest:
    """A validated POST /v1/jobs/submit, in the form the job services take."""

    command: list[str]
    num_tasks: int = 1
    cores_per_task: int = 1
    gpus_per_task: int = 0
    num_nodes: int | None = None
    exclusive: bool = False
    option_flags: dict[str, Any] = field(default_factory=dict)  # open: shell options, each any JSON value
    envars: dict[str, str] = field(default_factory=dict)
    workdir: str = ""
    runtime: float = 0.0
    burstable: bool = False
    owner: str = ""  # the authenticated REST user, set by the app (never a submit parameter)


class SubmitError(InputError):
    """Invalid submit parameters; `errors` are "field: reason" lines."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


def _no_booleans(value: Any) -> Any:
    """JSON true is not a count (pydantic's lax int would take it as 1)."""
    if isinstance(value, bool):
        raise ValueError("must be a whole number, not true or false")
    return None if value == "" else value


def _pairs(value: Any) -> Any:
    """`k=v,k=v`, a JSON object, or a Python dict literal (what the upstream client's query string carries)."""
    if value is None or value == "":
        return {}
    if isinstance(value, str) and value.lstrip().startswith("{"):
        try:
            value = ast.literal_eval(value)
        except (ValueError, SyntaxError, MemoryError, RecursionError) as exc:
            raise ValueError("expected k=v,k=v or an object; the {...} text is not a literal dict") from exc
        if not isinstance(value, dict):
            raise ValueError("expected k=v,k=v or an object")
    if isinstance(value, str):
        out: dict[str, str] = {}
        for item in filter(None, value.split(",")):
            key, sep, val = item.partition("=")
            if not sep or not key.strip():
                raise ValueError(f"expected k=v,k=v, got {item[:40]!r}")
            out[key.strip()] = val
        return _no_nul_pairs(out)
    if isinstance(value, Mapping):
        if all(isinstance(k, str) and isinstance(v, str | int | float | bool) for k, v in value.items()):
            return _no_nul_pairs({k: str(v) for k, v in value.items()})
        raise ValueError("must map names to strings, numbers or booleans")
    raise ValueError("expected k=v,k=v or an object")


def _no_nul(text: str) -> str:
    """A NUL byte cannot pass through exec(2), the environment or a path: refuse it rather than cut the text."""
    if "\0" in text:
        raise ValueError("must not contain a NUL byte")
    return text


def _no_nul_pairs(pairs: dict[str, str]) -> dict[str, str]:
    for key, val in pairs.items():
        if "\0" in key or "\0" in val:
            raise ValueError(f"the entry {key[:40]!r} contains a NUL byte")
    return pairs


def command_words(value: Any) -> list[str]:
    """The command's words from a string (split like a shell would) or a list of strings; never empty."""
    if isinstance(value, str):
        if len(value) > MAX_COMMAND_CHARS:
            raise ValueError(f"must be at most {MAX_COMMAND_CHARS} characters long")
        if not value.strip():
            raise ValueError("is empty: give the program to run and its arguments")
        try:
            words = shlex.split(value)
        except ValueError as exc:  # shlex says "No closing quotation" or "No escaped character"
            problem = "a quote is not closed" if "quotation" in str(exc) else "it ends with a lone backslash"
            raise ValueError(f"cannot be split into words: {problem}") from exc
    elif isinstance(value, list | tuple):
        if not all(isinstance(word, str) for word in value):
            raise ValueError("must be a string or a list of strings")
        words = list(value)
        if sum(len(word) for word in words) > MAX_COMMAND_CHARS:
            raise ValueError(f"must be at most {MAX_COMMAND_CHARS} characters long in all")
    else:
        raise ValueError("must be a string or a list of strings")
    if not words or not any(word.strip() for word in words):
        raise ValueError("is empty: give the program to run and its arguments")
    if not words[0].strip():
        raise ValueError("is empty: its first word, the program to run, is blank")
    if any("\0" in word for word in words):
        raise ValueError("must not contain a NUL byte")
    return words


Count = Annotated[Annotated[int, Field(ge=1, le=MAX_COUNT)] | None, BeforeValidator(_no_booleans)]
GpuCount = Annotated[Annotated[int, Field(ge=0, le=MAX_COUNT)] | None, BeforeValidator(_no_booleans)]
Seconds = Annotated[Annotated[int, Field(ge=0, le=MAX_RUNTIME_SECONDS)] | None, BeforeValidator(_no_booleans)]
Pairs = Annotated[dict[str, str], BeforeValidator(_pairs)]


class SubmitParams(BaseModel):
    """The documented submit fields (flux-restful-api v1); the OpenAPI document shows this model."""

    model_config = ConfigDict(extra="forbid", str_max_length=MAX_COMMAND_CHARS)

    command: str | list[str] = Field(
        title="Command", description="the command line (split like a shell would) or its words"
    )
    num_tasks: Count = Field(None, title="Number of tasks", description="number of tasks (default 1)")
    cores_per_task: Count = Field(None, title="Cores per task", description="cores per task (default 1)")
    gpus_per_task: GpuCount = Field(None, title="GPUs per task", description="GPUs per task")
    num_nodes: Count = Field(None, title="Number of nodes", description="number of nodes to spread the tasks over")
    exclusive: bool = Field(False, title="Whole nodes only", description="whole nodes (needs num_nodes)")
    option_flags: Pairs = Field(
        default_factory=dict, title="Job shell options", description="job shell options: k=v,k=v or an object"
    )
    envars: Pairs = Field(
        default_factory=dict,
        title="Environment variables",
        description="environment: k=v,k=v, an object or a dict literal",
    )
    workdir: str = Field("", title="Working directory", description="working directory of the job")
    runtime: Seconds = Field(None, title="Time limit (seconds)", description="time limit in seconds (0: none)")
    is_launcher: bool = Field(False, title="Launcher job", description="not supported: submit the command itself")
    burstable: bool = Field(
        False, title="May run on burst nodes", description="may run on nodes a burst brings (system.burstable)"
    )

    @field_validator("command", mode="before")
    @classmethod
    def _words(cls, value: Any) -> list[str]:
        return command_words(value)

    @field_validator("workdir")
    @classmethod
    def _path(cls, value: str) -> str:
        return _no_nul(value)

    @field_validator("is_launcher")
    @classmethod
    def _no_launcher(cls, value: bool) -> bool:
        if value:
            raise ValueError("launcher jobs are not supported; submit the command itself")
        return value


def _error_lines(exc: ValidationError) -> list[str]:
    lines = error_lines(exc.errors(include_url=False), {"extra_forbidden": "unknown parameter"})
    return [
        "command: is required (a string or a list of strings)" if line == "command: is required" else line
        for line in lines
    ]


def parse_submit(params: JsonObject) -> SubmitRequest:
    """Validate submit parameters from a query string, a form or a JSON body; every error names its field."""
    try:
        model = SubmitParams.model_validate(dict(params))
    except ValidationError as exc:
        raise SubmitError(_error_lines(exc)) from None
    if model.exclusive and model.num_nodes is None:
        raise SubmitError(["exclusive: needs num_nodes"])
    command = command_words(model.command)
    return SubmitRequest(
        command=command,
        num_tasks=model.num_tasks or 1,
        cores_per_task=model.cores_per_task or 1,
        gpus_per_task=model.gpus_per_task or 0,
        num_nodes=model.num_nodes,
        exclusive=model.exclusive,
        option_flags=dict(model.option_flags),
        envars=dict(model.envars),
        workdir=model.workdir,
        runtime=float(model.runtime or 0),
        burstable=model.burstable,
    )


def check_gpus(request: SubmitRequest, available: int) -> None:
    """Refuse a GPU request the cluster cannot meet, at submit: a scheduler would ignore it or strand the job.

    `available` is the cluster's GPU count (0 for the built-in broker, which schedules no GPUs)."""
    if not request.gpus_per_task:
        return
    if available <= 0:
        raise SubmitError([f"gpus_per_task: this cluster has no GPUs (asked for {request.gpus_per_task} per task)"])
    needed = request.gpus_per_task * request.num_tasks
    if needed > available:
        raise SubmitError(
            [f"gpus_per_task: {request.num_tasks} tasks x {request.gpus_per_task} GPUs is {needed}; the cluster has "
             f"{available}"]
        )  # fmt: skip
