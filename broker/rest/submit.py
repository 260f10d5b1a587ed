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
    option_flags: dict[str, Any] = field(default_factory=dict)
    envars: dict[str, str] = field(default_factory=dict)
    workdir: str = ""
    runtime: float = 0.0
    burstable: bool = False
    owner: str = ""  # the authenticated REST user, set by the app (never a submit parameter)


class SubmitError(ValueError):
    """Invalid submit parameters; `errors` are "field: reason" lines."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


def _no_booleans(value: Any) -> Any:
    """JSON true is not a count (pydantic's lax int would take it as 1)."""
    if isinstance(value, bool):
        raise ValueError("must be an integer, got a boolean")
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
        return out
    if isinstance(value, Mapping):
        if all(isinstance(k, str) and isinstance(v, str | int | float | bool) for k, v in value.items()):
            return {k: str(v) for k, v in value.items()}
        raise ValueError("must map names to strings, numbers or booleans")
    raise ValueError("expected k=v,k=v or an object")


Count = Annotated[Annotated[int, Field(ge=1, le=MAX_COUNT)] | None, BeforeValidator(_no_booleans)]
GpuCount = Annotated[Annotated[int, Field(ge=0, le=MAX_COUNT)] | None, BeforeValidator(_no_booleans)]
Seconds = Annotated[Annotated[int, Field(ge=0, le=MAX_RUNTIME_SECONDS)] | None, BeforeValidator(_no_booleans)]
Pairs = Annotated[dict[str, str], BeforeValidator(_pairs)]


class SubmitParams(BaseModel):
    """The documented submit fields (flux-restful-api v1); the OpenAPI document shows this model."""

    model_config = ConfigDict(extra="forbid", str_max_length=MAX_COMMAND_CHARS)

    command: str | list[str] = Field(description="the command line (split like a shell would) or its words")
    num_tasks: Count = Field(None, description="number of tasks (default 1)")
    cores_per_task: Count = Field(None, description="cores per task (default 1)")
    gpus_per_task: GpuCount = Field(None, description="GPUs per task")
    num_nodes: Count = Field(None, description="number of nodes to spread the tasks over")
    exclusive: bool = Field(False, description="whole nodes (needs num_nodes)")
    option_flags: Pairs = Field(default_factory=dict, description="job shell options: k=v,k=v or an object")
    envars: Pairs = Field(default_factory=dict, description="environment: k=v,k=v, an object or a dict literal")
    workdir: str = Field("", description="working directory of the job")
    runtime: Seconds = Field(None, description="time limit in seconds (0: none)")
    is_launcher: bool = Field(False, description="not supported: submit the command itself")
    burstable: bool = Field(False, description="may run on nodes a burst brings (system.burstable)")

    @field_validator("command")
    @classmethod
    def _words(cls, value: str | list[str]) -> list[str]:
        if isinstance(value, list):
            if not value:
                raise ValueError("is required (a string or a list of strings)")
            return value
        if not value.strip():
            raise ValueError("is required (a string or a list of strings)")
        try:
            return shlex.split(value)
        except ValueError as exc:
            raise ValueError(f"cannot be split into words ({exc})") from exc

    @field_validator("is_launcher")
    @classmethod
    def _no_launcher(cls, value: bool) -> bool:
        if value:
            raise ValueError("launcher jobs are not supported; submit the command itself")
        return value


def _error_lines(exc: ValidationError) -> list[str]:
    lines = []
    for error in exc.errors(include_url=False):
        name = ".".join(str(part) for part in error["loc"][:1]) or "body"
        message = str(error["msg"]).removeprefix("Value error, ")
        if error["type"] == "missing":
            message = "is required (a string or a list of strings)" if name == "command" else "is required"
        elif error["type"] == "extra_forbidden":
            message = "unknown parameter"
        lines.append(f"{name}: {message}")
    return list(dict.fromkeys(lines))  # a union reports one field twice


def parse_submit(params: Mapping[str, Any]) -> SubmitRequest:
    """Validate submit parameters from a query string, a form or a JSON body; every error names its field."""
    try:
        model = SubmitParams.model_validate(dict(params))
    except ValidationError as exc:
        raise SubmitError(_error_lines(exc)) from None
    if model.exclusive and model.num_nodes is None:
        raise SubmitError(["exclusive: needs num_nodes"])
    command = model.command if isinstance(model.command, list) else shlex.split(model.command)
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
