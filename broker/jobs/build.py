"""Building a version 1 jobspec (Flux RFC 25) the way `flux submit` does.

Kept apart from jobspec.py's dataclasses: this is on the start-up path of every `flux submit`/`flux run`.
"""

from __future__ import annotations

from broker.errors import InputError

TYPE_CHECKING = False  # typing's import costs `flux run true` 5 ms: annotations only
if TYPE_CHECKING:
    from typing import Any

    from broker.jobs.shapes import Jobspec, JobspecAttributes, ResourceVertex, TaskEntry


class JobspecError(InputError):
    """A jobspec that cannot be run; the message names the offending field."""


def build_jobspec(
    command: list[str],
    ntasks: int = 1,
    nnodes: int | None = None,
    cores_per_task: int = 1,
    gpus_per_task: int = 0,
    exclusive: bool = False,
    duration: float = 0.0,
    cwd: str = "",
    environment: dict[str, str] | None = None,
    name: str = "",
    queue: str = "",
    shell_options: dict[str, Any] | None = None,  # open: the shell's options (and its plugins')
    system_attributes: dict[str, Any] | None = None,  # open: jobspec system attributes, any of them
    user_attributes: dict[str, Any] | None = None,  # open: the user's own attributes
) -> Jobspec:
    """A canonical version 1 jobspec, as `flux submit` would produce it."""
    if not command:
        raise JobspecError("command: must not be empty")
    if ntasks < 1:
        raise JobspecError(f"ntasks: must be at least 1 (got {ntasks})")
    if nnodes is not None and nnodes < 1:
        raise JobspecError(f"nnodes: must be at least 1 (got {nnodes})")
    if nnodes is not None and ntasks < nnodes:
        ntasks = nnodes
    if cores_per_task < 1:
        raise JobspecError(f"cores_per_task: must be at least 1 (got {cores_per_task})")
    slot_with: list[ResourceVertex] = [{"type": "core", "count": cores_per_task}]
    if gpus_per_task:
        slot_with.append({"type": "gpu", "count": gpus_per_task})
    resources, tasks = _shape(command, ntasks, nnodes, exclusive, slot_with)
    system = dict(system_attributes or {})
    system["duration"] = float(duration)
    if cwd:
        system["cwd"] = cwd
    if environment is not None:
        system["environment"] = dict(environment)
    if name:
        system.setdefault("job", {})["name"] = name
    if queue:
        system["queue"] = queue
    if shell_options:
        system.setdefault("shell", {})["options"] = dict(shell_options)
    attributes: JobspecAttributes = {"system": system}
    if user_attributes:
        attributes["user"] = dict(user_attributes)
    return {"version": 1, "resources": resources, "tasks": [tasks], "attributes": attributes}


def _shape(
    command: list[str], ntasks: int, nnodes: int | None, exclusive: bool, slot_with: list[ResourceVertex]
) -> tuple[list[ResourceVertex], TaskEntry]:
    """The resource vertex (`-n N`: N slots; `-N M`: M nodes each holding its share of slots) and the task."""
    tasks: TaskEntry = {"command": list(command), "slot": "task", "count": {"per_slot": 1}}
    if nnodes is None:
        return [{"type": "slot", "count": ntasks, "label": "task", "with": slot_with}], tasks
    per_node = -(-ntasks // nnodes)  # ceil, exactly, without importing math
    node: ResourceVertex = {
        "type": "node",
        "count": nnodes,
        "with": [{"type": "slot", "count": per_node, "label": "task", "with": slot_with}],
    }
    if exclusive:
        node["exclusive"] = True
    if ntasks % nnodes:
        tasks["count"] = {"total": ntasks}
    return [node], tasks
