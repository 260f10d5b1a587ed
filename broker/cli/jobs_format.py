"""`flux jobs` output: Flux's format fields, headers and abbreviations, as pure functions over JobInfo."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from ..jobs.api import JobInfo
from .options import OptionError

DEFAULT_FORMAT = (
    "{id.f58:>12} {username:<8.8} {name:<10.10} {status_abbrev:>2.2} {ntasks:>6} {nnodes:>6} {runtime!H:>8} "
    "{contextual_info}"
)
_HEADERS = {
    "id": "JOBID",
    "id.f58": "JOBID",
    "id.dec": "JOBID",
    "username": "USER",
    "userid": "UID",
    "name": "NAME",
    "status_abbrev": "ST",
    "state_single": "ST",
    "status": "STATUS",
    "state": "STATE",
    "result": "RESULT",
    "result_abbrev": "RS",
    "returncode": "RC",
    "ntasks": "NTASKS",
    "nnodes": "NNODES",
    "runtime": "TIME",
    "nodelist": "NODELIST",
    "contextual_info": "INFO",
    "urgency": "URG",
    "priority": "PRI",
    "t_submit": "T_SUBMIT",
    "t_run": "T_RUN",
    "t_inactive": "T_INACTIVE",
    "exception.type": "EXCEPTION-TYPE",
    "exception.note": "EXCEPTION-NOTE",
    "annotations.sched.reason_pending": "REASON",
    "duration": "DURATION",
    "queue": "QUEUE",
    "success": "SUCCESS",
}
FIELDS = frozenset({*(h for h in _HEADERS if not h.startswith("annotations.")), "id.hex", "t_cleanup"})
"""Every field field_values gives, besides annotations.*; a format naming another is refused before it prints."""
_STATE_ABBREV = {"NEW": "N", "DEPEND": "D", "PRIORITY": "P", "SCHED": "S", "RUN": "R", "CLEANUP": "C"}
_RESULT_ABBREV = {"COMPLETED": "CD", "FAILED": "F", "CANCELED": "CA", "TIMEOUT": "TO"}


def _contextual_info(info: JobInfo) -> str:
    """flux-core's INFO column (flux.job.info.contextual_info): why a job waits, else where it runs or ran."""
    if info.state == "PRIORITY":
        return "priority-wait"
    if info.state in ("NEW", "DEPEND", "SCHED"):
        if info.urgency == 0 or info.priority == 0:
            return "held" if info.urgency == 0 else "priority-hold"
        sched = info.annotations.get("sched")  # sched.reason_pending, e.g. what a burst is doing for it
        return str(sched.get("reason_pending") or "") if isinstance(sched, dict) else ""
    return info.nodelist


def field_values(info: JobInfo) -> dict[str, str | int | float | bool]:
    """Every plain field of `info` by its Flux name (FIELDS names the same set; a test holds them equal)."""
    import pwd

    status = info.result if info.state == "INACTIVE" and info.result else info.state
    return {
        "id": info.f58,
        "id.f58": info.f58,
        "id.dec": info.id,
        "id.hex": f"{info.id:#x}",
        "username": _username(info.userid, pwd),
        "userid": info.userid,
        "name": info.name,
        "state": info.state,
        "state_single": _STATE_ABBREV.get(info.state, "I"),
        "status": status,
        "status_abbrev": _RESULT_ABBREV.get(status, _STATE_ABBREV.get(status, "I")),
        "result": info.result,
        "result_abbrev": _RESULT_ABBREV.get(info.result, ""),
        "returncode": "" if info.returncode is None else info.returncode,
        "ntasks": info.ntasks,
        "nnodes": info.nnodes if info.nnodes else "",
        "runtime": info.runtime,
        "nodelist": info.nodelist,
        "contextual_info": _contextual_info(info),
        "urgency": info.urgency,
        "priority": info.priority,
        "t_submit": info.t_submit,
        "t_run": info.t_run,
        "t_cleanup": info.t_cleanup,
        "t_inactive": info.t_inactive,
        "exception.type": info.exception_type,
        "exception.note": info.exception_note,
        "duration": info.duration,
        "success": info.success,
        "queue": "",
    }


def _field(info: JobInfo, name: str) -> Any:
    if name.startswith("annotations."):  # Flux's e.g. {annotations.sched.reason_pending}
        node: Any = info.annotations
        for key in name.split(".")[1:]:
            node = node.get(key, "") if isinstance(node, Mapping) else ""
        return node
    values = field_values(info)
    if name not in values:
        raise OptionError(f"--format: unknown field {name!r}")
    return values[name]


_USERS: dict[int, str] = {}


def _username(uid: int, pwd: Any) -> str:
    if uid not in _USERS:
        try:
            _USERS[uid] = pwd.getpwuid(uid).pw_name
        except KeyError:
            _USERS[uid] = str(uid)
    return _USERS[uid]


def _human(seconds: float) -> str:
    if seconds <= 0:
        return "0s"
    if seconds < 60:
        return f"{seconds:.3f}s" if seconds < 10 else f"{seconds:.1f}s"
    if seconds < 3600:
        return f"{seconds / 60:.1f}m"
    return f"{seconds / 3600:.1f}h"


def format_rows(infos: list[JobInfo], fmt: str, header: bool) -> list[str]:
    import re

    pattern = re.compile(r"\{([a-z_.0-9]+)(?:!([a-zA-Z]))?(?::([^}]*))?\}")
    rows: list[str] = []
    for match in pattern.finditer(fmt):  # refused whole, before any row: as flux-core's OutputFormat does
        name, spec = match.group(1), match.group(3) or ""
        if name not in FIELDS and not name.startswith("annotations."):
            raise OptionError(f"--format: unknown field {name!r}")
        try:
            format("", re.sub(r"[^<>^0-9.]", "", spec.rstrip("h+")))
        except ValueError as exc:
            raise OptionError(f"--format: field {name!r}: {exc}") from None

    def render(info: JobInfo | None) -> str:
        def one(match: re.Match[str]) -> str:
            name, conv, spec = match.group(1), match.group(2), (match.group(3) or "").rstrip("h+")
            if info is None:
                text = _HEADERS.get(name, name.upper())
                spec = re.sub(r"[^<>^0-9.]", "", spec)
                return format(text, spec)
            value = _field(info, name)
            if conv in ("H", "F") and isinstance(value, float):
                value = _human(value)
            elif conv == "d" and isinstance(value, float):
                value = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(value)) if value else ""
            try:
                return format(value, spec)
            except ValueError:
                return format(str(value), re.sub(r"[^<>^0-9.]", "", spec))

        return pattern.sub(one, fmt).rstrip()

    if header:
        rows.append(render(None))
    rows.extend(render(info) for info in infos)
    return rows
