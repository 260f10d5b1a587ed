"""The fixed JSON shapes the job layer writes and reads: job records the job manager answers with, the REST
flavour of a job, eventlog entries, the archive's manifest and summary, the job manager's small replies.

TypedDicts only (no behaviour), in a module of their own so every side (broker, CLI, REST, product) names the
same shape. The lean job CLI imports this module only for type checking (`typing` costs `flux run` start-up).
"""

from __future__ import annotations

from typing import Any, TypedDict

ResourceVertex = TypedDict(
    "ResourceVertex",
    {"type": str, "count": int, "label": str, "exclusive": bool, "with": list["ResourceVertex"]},
    total=False,
)
"""A jobspec resource vertex (RFC 14) as build_jobspec writes them: node > slot > core/gpu."""


class TaskEntry(TypedDict):
    """A jobspec's task entry: the command, the slot it runs in, and the count (per_slot 1, or a total)."""

    command: list[str]
    slot: str
    count: dict[str, int]


ShellOptions = TypedDict(
    "ShellOptions",
    {
        "mpi": str,
        "mpi-wait": str,
        "mpirun-args": str | list[str],
        "pmpi": bool | int | str,
        "pmpi-dir": str,
        "pmpi-boundary": str,
        "cpu-affinity": str,
        "output": dict[str, "FileOutput"],
    },
    total=False,
)
"""The shell options (attributes.system.shell.options, `-o KEY=VALUE`) the broker reads, as documented. Other
keys pass through to the job untouched; the values are the user's, so each is checked where it is read."""


class JobspecAttributes(TypedDict, total=False):
    """A jobspec's attributes: system (duration, cwd, environment, job.name, queue, shell.options...) and user."""

    system: dict[str, Any]  # open: system attributes, including any a user sets with --setattr
    user: dict[str, Any]  # open: the user's own


class Jobspec(TypedDict):
    """A version 1 jobspec (RFC 14/25) as build_jobspec writes it; its attributes are open."""

    version: int
    resources: list[ResourceVertex]
    tasks: list[TaskEntry]
    attributes: JobspecAttributes


class FileOutput(TypedDict):
    """Where a stream goes (shell option output.stdout / output.stderr): a file at a path."""

    type: str
    path: str


class JobException(TypedDict, total=False):
    """A job's first fatal exception as a job record reports it (occurred False: none)."""

    occurred: bool
    type: str
    note: str
    severity: int


class ExceptionContext(TypedDict, total=False):
    """The context of a journaled `exception` event (flux-core's eventlog names)."""

    type: str
    severity: int
    note: str
    userid: int


class SchedAnnotations(TypedDict, total=False):
    """What the scheduler side says of a job: its cores ("rank[0-1]/core[0-1]"), or why it waits."""

    resource_summary: str
    reason_pending: str


class SaveAnnotations(TypedDict, total=False):
    """A queue save's note on a running job: the signal it was sent to checkpoint."""

    checkpoint: str


class SubinstanceAnnotations(TypedDict, total=False):
    """Where a job's sub-instance listens (broker/subinstance.py), for its other ranks to join."""

    endpoint: str
    uri: str
    host: str


class Annotations(TypedDict, total=False):
    """A job's annotations, merged key by key from its `annotate` events (job-manager.annotate): the
    scheduler's, a save's, a sub-instance's and the user's own."""

    sched: SchedAnnotations
    save: SaveAnnotations
    subinstance: SubinstanceAnnotations
    user: dict[str, Any]  # open: `flux job annotate`'s keys, any JSON the user gives


class JobInfoRecord(TypedDict, total=False):
    """A job as job-manager.info, .list and .wait answer (broker/jobs/info.job_info writes all of these keys;
    JobInfo.from_dict also reads records that leave some out, as flux-core's job-list does)."""

    id: int
    id_f58: str
    state: str
    result: str
    returncode: int | None
    waitstatus: int | None
    success: bool
    nnodes: int
    ntasks: int
    ranks: list[int] | str
    nodelist: str
    runtime: float
    exception: JobException
    name: str
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
    duration: float
    ncores: int
    allocation: dict[str, int]
    expiration: float
    cwd: str
    queue: str
    burstable: bool
    owner: str
    annotations: Annotations
    requeues: int


class JobInfoWithSpec(JobInfoRecord, total=False):
    """job-manager.info's answer: the job's record, and its jobspec when the request asks for it."""

    jobspec: Jobspec


class RestfulJob(TypedDict):
    """GET /v1/jobs/{id} as flux-restful-api returns it (JobInfo.to_restful)."""

    id: int
    state: str
    result: str
    returncode: int | None
    nnodes: int
    ntasks: int
    nodelist: str
    runtime: float
    exception: JobException
    name: str
    userid: int
    urgency: int
    priority: int
    t_submit: float
    t_run: float
    t_cleanup: float
    t_inactive: float
    success: bool
    duration: float


class RestfulException(TypedDict):
    """A detailed record's exception object (severity "" when none occurred)."""

    occurred: bool
    severity: int | str
    type: str
    note: str


class JobListRecord(TypedDict, total=False):
    """A job as the reference REST server answers (jobs/rest_records.py): GET /v1/jobs lists job-list's record
    (state and result as flux-core's bits); GET /v1/jobs/{id} and the detailed listings spell them out and add
    returncode, runtime and an exception object ("" for what is not known yet, as the reference does). Keys
    job-list leaves out until known are left out."""

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
    state: int | str
    name: str
    ntasks: int
    ncores: int
    duration: float
    nnodes: int | str
    ranks: str
    nodelist: str
    success: bool
    exception_occurred: bool
    exception_type: str
    exception_severity: int
    exception_note: str
    result: int | str
    expiration: float | str
    annotations: Annotations
    waitstatus: int | str
    cwd: str
    returncode: int | str
    runtime: float
    exception: RestfulException


class ArchiveSource(TypedDict):
    """The cluster an archive was saved on (archive.Source as JSON)."""

    cluster: str
    hosts: list[str]
    size: int


class SavedJobEntry(TypedDict, total=False):
    """One line of the manifest's job index (archive.SavedJob as JSON; result and requeued may be left out)."""

    id: int
    state: str
    result: str
    requeued: bool


class ManifestDoc(TypedDict):
    """manifest.json inside a queue archive."""

    kind: str
    format: int
    created: float
    source: ArchiveSource
    jobs: list[SavedJobEntry]
    files: dict[str, str]


class ArchiveSummary(TypedDict):
    """The counts people read about an archive: how many jobs, pending, requeued by the save, done."""

    cluster: str
    jobs: int
    pending: int
    requeued: int
    inactive: int


class StatsViews(TypedDict):
    """Listing views kept by kind, and jobs whose views wait to be rendered ahead."""

    kept: dict[str, int]
    to_render: int


class JobStats(TypedDict):
    """job-manager.stats: jobs by state name (lower case), the queue's length, how many run, listing views."""

    states: dict[str, int]
    queue_length: int
    running: int
    views: StatsViews


class QueueStatus(TypedDict):
    """job-manager.queue's answer: whether the queue is enabled and started, why not, its policy and counts."""

    enabled: bool
    enable_reason: str
    started: bool
    stop_reason: str
    policy: str
    pending: int
    running: int


class QueueCounts(TypedDict):
    """job-manager.queue-idle's answer once the queue is idle (or drained): what is left."""

    pending: int
    running: int


class SaveReply(TypedDict, total=False):
    """job-manager.save's answer once the archive is written: where, when, and the archive's counts."""

    path: str
    saved: float
    cluster: str
    jobs: int
    pending: int
    requeued: int
    inactive: int
