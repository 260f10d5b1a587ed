"""Pure functions from jobs and form input to what the pages show: filters, paging, fields, submit errors."""

from __future__ import annotations

import datetime
import json
import pwd
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from starlette.datastructures import UploadFile

from broker.jobs.api import JobInfo
from broker.rest.answers import EventRecord
from broker.rest.submit import SubmitParams

PAGE_SIZE = 20
PENDING = frozenset({"NEW", "DEPEND", "PRIORITY", "SCHED"})
RUNNING = frozenset({"RUN", "CLEANUP"})
STATE_FILTERS = ("all", "active", "pending", "running", "inactive", "completed", "failed")
HIDDEN_SUBMIT_FIELDS = frozenset({"is_launcher"})  # the API refuses it when true: no point offering it


def matches_state(job: JobInfo, wanted: str) -> bool:
    if wanted == "active":
        return job.active
    if wanted == "pending":
        return job.state in PENDING
    if wanted == "running":
        return job.state in RUNNING
    if wanted == "inactive":
        return not job.active
    if wanted == "completed":
        return job.state == "INACTIVE" and job.result == "COMPLETED"
    if wanted == "failed":
        return job.state == "INACTIVE" and job.result != "COMPLETED"
    return True


def matches_text(job: JobInfo, text: str) -> bool:
    """As `/v1/jobs/search`: the name, or the id in either spelling."""
    needle = text.strip().lower()
    return not needle or needle in job.name.lower() or needle in str(job.id) or needle in job.f58.lower()


@dataclass(frozen=True)
class JobPage:
    jobs: list[JobInfo]
    page: int
    pages: int
    total: int
    matched: int


def job_page(jobs: Sequence[JobInfo], text: str, state: str, page: int, size: int = PAGE_SIZE) -> JobPage:
    """One page of the jobs that match (newest first, as the broker lists them); pages count from 1."""
    matched = [j for j in jobs if matches_state(j, state) and matches_text(j, text)]
    pages = max(1, -(-len(matched) // size))
    page = min(max(1, page), pages)
    return JobPage(matched[(page - 1) * size : page * size], page, pages, len(jobs), len(matched))


def status_word(job: JobInfo) -> str:
    """One word for the table: the state while active, the result after."""
    return job.state if job.active else (job.result or "INACTIVE")


def when(stamp: float) -> str:
    if not stamp:
        return ""
    return datetime.datetime.fromtimestamp(stamp, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def owner_label(job: JobInfo) -> str:
    """Who a job belongs to, as the access rule sees it: the REST user who submitted it, or else the Unix
    account it runs as (a job submitted inside the pod)."""
    if job.owner:
        return job.owner
    try:
        return pwd.getpwuid(job.userid).pw_name
    except KeyError:
        return f"uid {job.userid}"


def command_text(words: Sequence[str]) -> str:
    """A job's command as one line a shell would split back into the same words."""
    return shlex.join(words)


def job_fields(job: JobInfo) -> list[tuple[str, str]]:
    """The job page's field list, in reading order (blank ones left out)."""
    fields: list[tuple[str, Any]] = [
        ("id", f"{job.f58} ({job.id})"),
        ("name", job.name),
        ("owner", job.owner),
        ("state", job.state),
        ("result", job.result),
        ("returncode", "" if job.returncode is None else job.returncode),
        ("userid", job.userid),
        ("ntasks", job.ntasks),
        ("ncores", job.ncores or ""),
        ("nnodes", job.nnodes or ""),
        ("nodelist", job.nodelist),
        ("duration", f"{job.duration:g} s" if job.duration else ""),
        ("submitted", when(job.t_submit)),
        ("started", when(job.t_run)),
        ("finished", when(job.t_inactive)),
        ("runtime", f"{job.runtime:.3f} s" if job.runtime else ""),
        ("cwd", job.cwd),
        ("exception", f"{job.exception_type}: {job.exception_note}" if job.exception_type else ""),
    ]
    return [(name, str(value)) for name, value in fields if value != ""]


@dataclass(frozen=True)
class EventRow:
    name: str
    offset: str
    context: str


def event_rows(events: Sequence[EventRecord], limit: int = 240) -> list[EventRow]:
    """The eventlog as rows: seconds since submit, name, context (the jobspec left out: it is the whole request,
    environment and all, and the fields above already say what matters)."""
    start = float(events[0].get("timestamp", 0.0)) if events else 0.0
    rows = []
    for event in events:
        context = {k: v for k, v in dict(event.get("context") or {}).items() if k != "jobspec"}
        text = json.dumps(context, sort_keys=True) if context else ""
        if len(text) > limit:
            text = text[: limit - 1] + "…"
        offset = float(event.get("timestamp", start)) - start
        rows.append(EventRow(str(event.get("name", "")), f"+{offset:.3f} s", text))
    return rows


@dataclass(frozen=True)
class FormField:
    name: str
    kind: str  # "textarea", "number" or "checkbox" or "text"
    help: str
    minimum: int | None = None
    label: str = ""  # in words ("Number of tasks"); the API's parameter name is `name`


def submit_fields() -> list[FormField]:
    """The submit form: the API's own model's fields, each with its description as help text."""
    out = []
    for name, info in SubmitParams.model_fields.items():
        if name in HIDDEN_SUBMIT_FIELDS:
            continue
        annotation = str(info.annotation)
        if name == "command":
            kind = "textarea"
        elif info.annotation is bool:
            kind = "checkbox"
        elif "int" in annotation:
            kind = "number"
        else:
            kind = "text"
        minimum = 0 if name in ("gpus_per_task", "runtime") else 1 if kind == "number" else None
        out.append(FormField(name, kind, info.description or "", minimum, info.title or name.replace("_", " ")))
    return out


def submit_params(form: Mapping[str, str | UploadFile], fields: Sequence[FormField]) -> dict[str, str]:
    """Form input -> the API's submit parameters: blank fields left to their defaults, checkboxes true/false."""
    params: dict[str, str] = {}
    for field in fields:
        value = form.get(field.name)
        if field.kind == "checkbox":
            if value is not None:
                params[field.name] = "true"
        elif isinstance(value, str) and value.strip():
            params[field.name] = value
    return params


def errors_by_field(lines: Sequence[str]) -> dict[str, list[str]]:
    """ "field: reason" lines (what parse_submit raises) grouped by field; others under "" (the whole form)."""
    known = set(SubmitParams.model_fields)
    out: dict[str, list[str]] = {}
    for line in lines:
        name, sep, reason = line.partition(": ")
        key = name if sep and name in known else ""
        out.setdefault(key, []).append(reason if key else line)
    return out
