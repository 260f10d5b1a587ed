"""`minicluster status` as kubectl shows things: one document of facts, printed as JSON or as text.

Both outputs come from `status_document`, so they cannot disagree: the text is a rendering of the JSON (header
fields like `kubectl describe`, a pod table like `kubectl get pods`, conditions as a table of words).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict, cast

from miniclusters.backends.base import ClusterStatus, PodStatus
from miniclusters.backends.states import cluster_state
from miniclusters.words import plural

if TYPE_CHECKING:
    from miniclusters.autoscaling.state import AutoscalerState
    from miniclusters.campaign.state_file import CampaignState
    from miniclusters.cli.burst_status import BurstReport
    from miniclusters.multiplex.state_file import MultiplexState


class ConditionJson(TypedDict):
    """A pod's or the cluster's condition (backends.base's PodCondition, ClusterCondition) as JSON."""

    type: str
    status: str
    reason: str
    message: str


class PodJson(TypedDict):
    """backends.base.PodStatus as JSON, with the word kubectl's STATUS column would show."""

    index: int
    name: str
    phase: str
    ready: bool
    cpu_desired: str | None
    cpu_allocated: str | None
    cpu_actual: str | None
    node: str | None
    exit_code: int | None
    conditions: tuple[ConditionJson, ...]
    restarts: int
    reason: str | None
    refused: str | None
    status: str


class StatusDocument(TypedDict):
    """`minicluster status -o json`: backends.base.ClusterStatus as JSON plus the words the text prints; the
    sections of the loops and bursts are added by the command when there are any."""

    name: str
    namespace: str
    size: int
    max_size: int
    min_size: int
    pods: tuple[PodJson, ...]
    ranks_up: tuple[int, ...] | None
    ranks_down: tuple[int, ...] | None
    conditions: tuple[ConditionJson, ...]
    finished: bool
    succeeded: bool | None
    lead_error: str | None
    rest_url: str | None
    deleting: bool
    state: str
    ranks: str
    running_pods: int
    ready_pods: int
    multiplexing: NotRequired[MultiplexState]
    bursts: NotRequired[BurstReport | None]
    autoscaling: NotRequired[AutoscalerState | None]
    drained: NotRequired[list[dict[str, str]] | None]
    campaign: NotRequired[CampaignState]


# kubectl's STATUS column words for pod phases when no container reason says more.
PHASE_WORDS = {"Succeeded": "Completed", "Failed": "Error"}


def pod_status_word(pod: PodStatus) -> str:
    """What kubectl's STATUS column would say: the container's reason if any, else the phase in its words."""
    if pod.reason:
        return pod.reason
    return PHASE_WORDS.get(pod.phase, pod.phase)


def compress_ranks(ranks: tuple[int, ...] | list[int]) -> str:
    """0,1,2,3,5 -> "0-3,5" (Flux's idset spelling)."""
    parts: list[str] = []
    ordered = sorted(set(ranks))
    start = previous = None
    for rank in [*ordered, None]:
        if rank is not None and previous is not None and rank == previous + 1:
            previous = rank
            continue
        if start is not None:
            parts.append(str(start) if start == previous else f"{start}-{previous}")
        start = previous = rank
    return ",".join(parts)


def ranks_words(status: ClusterStatus) -> str:
    if status.finished:
        return "none (the lead has finished)"
    if status.ranks_up is None:
        return f"unknown ({status.lead_error})" if status.lead_error else "unknown"
    words = [f"{compress_ranks(status.ranks_up) or 'none'} up"]
    if status.ranks_down:
        words.append(f"{compress_ranks(status.ranks_down)} down")
    return ", ".join(words)


def status_document(status: ClusterStatus) -> StatusDocument:
    """Every fact `status` shows, JSON-ready: the backend's ClusterStatus plus the words the text prints."""
    document = cast(StatusDocument, asdict(status))  # asdict: the dataclass's fields, the words set below
    document["min_size"] = max(1, status.min_size)
    document["state"] = cluster_state(status)
    document["ranks"] = ranks_words(status)
    document["running_pods"] = status.running_pods
    document["ready_pods"] = status.ready_pods
    for pod, entry in zip(status.pods, document["pods"], strict=True):
        entry["status"] = pod_status_word(pod)
    return document


def _table(rows: list[list[str]], indent: str = "") -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        (indent + "   ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))).rstrip()
        for row in rows
    ]


def render_status_text(document: StatusDocument) -> str:
    """The text form of a status document (see the module docstring)."""
    lines = [
        f"Name:        {document['name']}",
        f"Namespace:   {document['namespace']}",
        f"State:       {document['state']}",
        f"Size:        {plural(document['size'], 'pod')} (min {document['min_size']}, max {document['max_size']})",
        f"Pods:        {document['running_pods']} running, {document['ready_pods']} ready",
        f"Ranks:       {document['ranks']}",
    ]
    if document.get("rest_url"):
        lines.append(f"REST API:    {document['rest_url']}")
    if document["conditions"]:
        lines.append("Conditions:")
        rows = [["TYPE", "STATUS", "REASON", "MESSAGE"]]
        rows += [[c["type"], c["status"], c["reason"] or "-", c["message"] or "-"] for c in document["conditions"]]
        lines += _table(rows, indent="  ")
    lines.append("")
    rows = [["POD", "READY", "STATUS", "RESTARTS", "CPU(WANT)", "CPU(NOW)", "NODE"]]
    for pod in document["pods"]:
        rows.append(
            [
                pod["name"],
                "1/1" if pod["ready"] else "0/1",
                pod["status"],
                str(pod["restarts"]),
                pod["cpu_desired"] or "-",
                pod["cpu_actual"] or "-",
                pod["node"] or "-",
            ]
        )
    lines += _table(rows)
    lines += unscheduled_lines(document["pods"])
    return "\n".join(lines)


def unscheduled_lines(pods: Iterable[PodJson]) -> list[str]:
    """Why pods wait for a node, as the scheduler said it (their PodScheduled condition), pods with the same
    words on one line: a Pending pod's STATUS alone does not say that the cluster is out of CPU."""
    waiting: dict[tuple[str, str], list[int]] = {}
    for pod in pods:
        for condition in pod["conditions"]:
            if condition["type"] == "PodScheduled" and condition["status"] == "False":
                waiting.setdefault((condition["reason"] or "", condition["message"] or ""), []).append(pod["index"])
    if not waiting:
        return []
    lines = ["", "Not scheduled:"]
    for (reason, message), indices in waiting.items():
        words = ": ".join(part for part in (reason, message) if part) or "no reason given"
        lines.append(f"  {'pod' if len(indices) == 1 else 'pods'} {compress_ranks(indices)}: {words}")
    return lines


JSONPATH_FIELD = re.compile(r"\{\.([^{}]*)\}")
JSONPATH_STEP = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(?:\[(\d+)\])?")


def _jsonpath_value(document: Any, path: str) -> Any:
    value = document
    for step in path.split("."):
        match = JSONPATH_STEP.fullmatch(step)
        if match is None:
            raise ValueError(f"unsupported path step {step!r} (use .field or .field[N])")
        key, index = match.group(1), match.group(2)
        if not isinstance(value, dict) or key not in value:
            raise ValueError(f"no field {key!r} at {{.{path}}}")
        value = value[key]
        if index is not None:
            if not isinstance(value, (list, tuple)) or int(index) >= len(value):
                raise ValueError(f"{key}[{index}] is out of range at {{.{path}}}")
            value = value[int(index)]
    return value


def render_jsonpath(document: StatusDocument, template: str) -> str:
    """kubectl's `-o jsonpath=` for the simple case: `{.field.sub}` and `{.list[N].field}` in a template."""
    if not JSONPATH_FIELD.search(template):
        raise ValueError(f"{template!r} has no {{.field}} to print")

    def substitute(match: re.Match[str]) -> str:
        value = _jsonpath_value(document, match.group(1))
        if value is None:
            return ""
        if isinstance(value, (dict, list, tuple, bool)):
            return json.dumps(value)
        return str(value)

    return JSONPATH_FIELD.sub(substitute, template)
