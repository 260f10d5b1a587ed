"""The RPCs the REST server awaits on its event loop, each a topic with the shapes of its request and answer.

Why: the loop's handles (local_handle.py, async_broker.py, async_flux.py) carry any topic, so a handle alone
cannot know what an answer holds; a `Topic` names the topic and, to the type checker, the TypedDict its answer
is. The answer is cast to that shape once, where the handle decodes it (PendingRequests.call, AsyncFluxHandle.rpc).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Generic, NotRequired, TypedDict, TypeVar

if TYPE_CHECKING:
    from broker.jobs.shapes import JobInfoRecord, Jobspec
    from broker.modules.job_manager.replies import SubmitAck

Answer = TypeVar("Answer")


class Topic(Generic[Answer]):
    """A service's topic (its name at run time) and the TypedDict of its answer (for the type checker)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"Topic({self.name!r})"


class NoRequest(TypedDict):
    """A request with nothing to say ({}): the handles send it when given no payload."""


class JobIdRequest(TypedDict):
    """job-manager.info: which job."""

    id: int


class JobListRequest(TypedDict):
    """job-manager.list as the hot listing asks it: which states, how many at most."""

    states: int
    max_entries: int


class SubmitPayload(TypedDict):
    """job-manager.submit: the jobspec, its urgency, the submitting user and flux-core's submit flag bits
    (`flux submit --flags`: broker/cli/submit_stream.py sends them; the REST server sends none)."""

    jobspec: Jobspec
    urgency: int
    userid: int
    flags: NotRequired[int]


class JobList(TypedDict):
    """job-manager.list's answer: the jobs, newest first."""

    jobs: list[JobInfoRecord]


class ListIdRequest(TypedDict):
    """flux-core's job-list.list-id, as flux.job.job_list_id sends it."""

    id: int
    attrs: list[str]


class LookupRequest(TypedDict):
    """flux-core's job-info.lookup, as flux.job.job_info_lookup sends it."""

    id: int
    keys: list[str]
    flags: int


class FluxJobRecord(TypedDict, total=False):
    """flux-core's job-list record (attrs ["all"]): state and result as bits (flux/job.h), the exception
    flattened; keys not known yet are left out. Read key by key, each value checked (flux_records.py)."""

    id: int
    userid: int
    urgency: int
    priority: int
    t_submit: float
    t_depend: float
    t_priority: float
    t_sched: float
    t_run: float
    t_cleanup: float
    t_inactive: float
    state: int
    result: int
    name: str
    cwd: str
    ntasks: int
    ncores: int
    duration: float
    nnodes: int
    ranks: str
    nodelist: str
    expiration: float
    success: bool
    waitstatus: int
    exception_occurred: bool
    exception_type: str
    exception_severity: int
    exception_note: str
    annotations: dict[str, object]  # open: whatever the scheduler or `flux job annotate` attached


class ListIdAnswer(TypedDict):
    """job-list.list-id's answer: the job's record."""

    job: FluxJobRecord


class LookupAnswer(TypedDict, total=False):
    """job-info.lookup's answer: each key asked for (the jobspec as JSON text, or decoded with the JSON flag)."""

    id: int
    jobspec: str | Jobspec


Request = NoRequest | JobIdRequest | JobListRequest | SubmitPayload | ListIdRequest | LookupRequest
"""Every request the loop's handles send."""

JOB_INFO: Topic[JobInfoRecord] = Topic("job-manager.info")
JOB_LIST: Topic[JobList] = Topic("job-manager.list")
JOB_SUBMIT: Topic[SubmitAck] = Topic("job-manager.submit")
LIST_ID: Topic[ListIdAnswer] = Topic("job-list.list-id")
LOOKUP: Topic[LookupAnswer] = Topic("job-info.lookup")
