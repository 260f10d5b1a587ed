"""Jobspec version 1 (Flux RFC 25), the document `flux submit` sends, and the request the scheduler sees.

We build and read the canonical shapes `flux submit`/`flux run` produce:
`-n N` -> N slots of c cores; `-N M -n N` -> M nodes each holding its share of slots; `--exclusive` whole nodes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import repeat
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from broker.jobs.build import JobspecError, build_jobspec
from elasticity.model.resources import ResourceRequest

if TYPE_CHECKING:
    from broker.jobs.shapes import Jobspec, JobspecAttributes, ShellOptions

__all__ = ["JobSpec", "JobspecError", "ResourceRequest", "build_jobspec", "parse_jobspec"]


def _no_attributes() -> JobspecAttributes:
    return {}


@dataclass(frozen=True)
class JobSpec:
    """A validated jobspec, the fields the job manager and the scheduler read."""

    command: list[str]
    resources: ResourceRequest
    duration: float = 0.0
    """Time limit in seconds; 0 means none."""
    cwd: str = ""
    environment: dict[str, str] = field(default_factory=dict)
    """The jobspec's own dict, which jobs with equal environments share (the job manager): never change it."""
    name: str = ""
    queue: str = ""
    attributes: JobspecAttributes = field(default_factory=_no_attributes)
    """The whole attributes tree, including system.* keys we do not interpret (e.g. system.burstable)."""
    raw: Jobspec | None = None
    """The jobspec as submitted (parse_jobspec's; None: a JobSpec made by hand)."""

    @property
    def shell_options(self) -> ShellOptions:
        """The job's shell options (none: {}), as the jobspec holds them: checked where each is read."""
        options = self.attributes.get("system", {}).get("shell", {}).get("options", {})
        return cast("ShellOptions", options) if isinstance(options, dict) else {}


def _count(node: object, where: str) -> int:
    """A vertex's count (a positive integer, or RFC 14's {"min": N}), checked: the vertex is the user's."""
    count = node.get("count", 1) if isinstance(node, dict) else None
    if isinstance(count, dict):
        count = count.get("min", 1)
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise JobspecError(f"{where}.count: must be a positive integer")
    return count


def _slot_shape(slot: object, where: str) -> tuple[int, int]:
    """(cores, GPUs) of a slot vertex, checked: the vertex is the user's."""
    cores = gpus = 0
    for index, child in enumerate(slot.get("with", []) if isinstance(slot, dict) else []):
        kind = child.get("type")
        if kind == "core":
            cores = _count(child, f"{where}.with[{index}]")
        elif kind == "gpu":
            gpus = _count(child, f"{where}.with[{index}]")
        else:
            raise JobspecError(f"{where}.with[{index}].type: {kind!r} is not supported inside a slot")
    if cores < 1:
        raise JobspecError(f"{where}: a slot needs at least one core")
    return cores, gpus


def _resource_shape(resources: object) -> tuple[int | None, bool, int, int, int]:
    """(nnodes or None, exclusive, total slots, cores and GPUs per slot) from the one resource vertex."""
    if not isinstance(resources, list) or len(resources) != 1 or not isinstance(resources[0], dict):
        raise JobspecError("resources: must hold exactly one resource vertex")
    top = resources[0]
    if top.get("type") == "node":
        nnodes = _count(top, "resources[0]")
        children = top.get("with", [])
        if len(children) != 1 or children[0].get("type") != "slot":
            raise JobspecError("resources[0].with: a node must hold exactly one slot vertex")
        slot = children[0]
        slots_per_node = _count(slot, "resources[0].with[0]")
        cores, gpus = _slot_shape(slot, "resources[0].with[0]")
        return nnodes, bool(top.get("exclusive", False)), slots_per_node * nnodes, cores, gpus
    if top.get("type") == "slot":
        total_slots = _count(top, "resources[0]")
        cores, gpus = _slot_shape(top, "resources[0]")
        return None, False, total_slots, cores, gpus
    raise JobspecError(f"resources[0].type: {top.get('type')!r} is not supported (node or slot)")


def _task(tasks: object, total_slots: int) -> tuple[list[str], int]:
    """(command, ntasks) from the one task entry."""
    if not isinstance(tasks, list) or len(tasks) != 1 or not isinstance(tasks[0], dict):
        raise JobspecError("tasks: must hold exactly one task entry")
    task = tasks[0]
    command = task.get("command")
    if not isinstance(command, list) or not command or not all(isinstance(w, str) for w in command):
        raise JobspecError("tasks[0].command: must be a non-empty list of strings")
    count = task.get("count", {"per_slot": 1})
    if not isinstance(count, dict):
        raise JobspecError("tasks[0].count: must be an object")
    if "total" in count:
        ntasks = count["total"]
        if not isinstance(ntasks, int) or ntasks < 1 or ntasks > total_slots:
            raise JobspecError(f"tasks[0].count.total: must be between 1 and {total_slots}")
        return command, ntasks
    if count.get("per_slot", 1) != 1:
        raise JobspecError("tasks[0].count.per_slot: only 1 is supported")
    return command, total_slots


class _System(NamedTuple):
    """What the job manager reads of attributes.system, each checked."""

    duration: float
    environment: dict[str, str]
    cwd: str
    name: str
    queue: str


def _system(attributes: object) -> _System:
    """The system attributes the job manager reads, each checked (the job name: none here is "")."""
    if not isinstance(attributes, dict):
        raise JobspecError("attributes: must be an object")
    system = attributes.get("system", {})
    if not isinstance(system, dict):
        raise JobspecError("attributes.system: must be an object")
    duration = system.get("duration", 0)
    if not isinstance(duration, int | float) or isinstance(duration, bool) or not 0 <= duration < math.inf:
        raise JobspecError("attributes.system.duration: must be a finite, non-negative number of seconds")
    environment = system.get("environment", {})
    if not isinstance(environment, dict) or not all(map(isinstance, environment.values(), repeat(str))):
        raise JobspecError("attributes.system.environment: must map names to strings")
    cwd = system.get("cwd", "")
    if not isinstance(cwd, str):
        raise JobspecError("attributes.system.cwd: must be a string")
    job = system.get("job", {})
    name = job.get("name", "") if isinstance(job, dict) else ""
    return _System(float(duration), environment, cwd, str(name or ""), str(system.get("queue", "")))


def parse_jobspec(data: Any) -> JobSpec:
    """Validate a version 1 jobspec into what the job manager and scheduler need."""
    if not isinstance(data, dict):
        raise JobspecError("jobspec: must be a JSON object")
    if data.get("version") != 1:
        raise JobspecError(f"version: only version 1 is supported (got {data.get('version')!r})")
    nnodes, exclusive, total_slots, cores, gpus = _resource_shape(data.get("resources"))
    command, ntasks = _task(data.get("tasks"), total_slots)
    attributes = data.get("attributes", {})
    system = _system(attributes)
    request = ResourceRequest(
        ntasks=ntasks, cores_per_task=cores, nnodes=nnodes, exclusive=exclusive, gpus_per_task=gpus
    )
    return JobSpec(
        command=list(command),
        resources=request,
        duration=system.duration,
        cwd=system.cwd,
        environment=system.environment,  # the jobspec's own (no copy: read-only, and shared by jobs, issue 41)
        name=system.name or command[0].rsplit("/", 1)[-1],
        queue=system.queue,
        attributes=attributes,
        raw=cast("Jobspec", data),  # checked above: what the job manager keeps
    )
