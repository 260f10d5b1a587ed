"""A job's current view, derived purely from its events (the journal is the source of truth)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

from broker.jobs.journal import JobEvent
from broker.jobs.states import JobResult, JobState

if TYPE_CHECKING:
    from broker.jobs.shapes import Annotations, ExceptionContext, Jobspec

# Flux eventlog names and the state each leads to.
_STATE_AFTER = {
    "submit": JobState.DEPEND,
    "depend": JobState.PRIORITY,
    "priority": JobState.SCHED,
    "alloc": JobState.RUN,
    "finish": JobState.CLEANUP,
    "clean": JobState.INACTIVE,
}


def _no_annotations() -> Annotations:
    return {}


@dataclass
class JobRecord:
    """A job as the job manager keeps it: its jobspec, state and what happened to it."""

    jobid: int
    jobspec: Jobspec
    """The user's jobspec (RFC 14) as submitted, validated by jobs/jobspec.py; its attributes are open."""
    userid: int
    urgency: int
    t_submit: float
    state: JobState = JobState.NEW
    priority: int = 0
    result: JobResult | None = None
    waitstatus: int | None = None
    exception: ExceptionContext | None = None
    ranks: list[int] = field(default_factory=list)
    cores: dict[int, list[int]] = field(default_factory=dict)
    t_depend: float = 0.0  # when it entered DEPEND, PRIORITY, SCHED (Flux's job-list reports each)
    t_priority: float = 0.0
    t_sched: float = 0.0
    t_run: float = 0.0
    t_cleanup: float = 0.0
    t_inactive: float = 0.0
    requeues: int = 0
    flags: int = 0  # flux-core's submit flags (jobs/submit_flags.py)
    extra: Annotations = field(default_factory=_no_annotations)
    """The job's annotations (its `annotate` events merged)."""

    @property
    def returncode(self) -> int | None:
        """The shell-style exit code: status >> 8, or 128 + signal when killed."""
        if self.waitstatus is None:
            return None
        if self.waitstatus & 0x7F:
            return 128 + (self.waitstatus & 0x7F)
        return (self.waitstatus >> 8) & 0xFF

    def apply(self, event: JobEvent) -> None:
        """Advance this record by one event; unknown events are kept as annotations only."""
        name, context = event.name, event.context
        if name == "priority":
            self.priority = int(context.get("priority", 0))
        elif name == "urgency":
            self.urgency = int(context.get("urgency", self.urgency))
        elif name == "alloc":
            self.ranks = [int(r) for r in context.get("ranks", [])]
            self.cores = {int(r): list(c) for r, c in context.get("cores", {}).items()}
            self.t_run = event.timestamp
        elif name == "finish":
            self.waitstatus = int(context.get("status", 0))
            self.t_cleanup = event.timestamp
            if self.result is None:
                self.result = JobResult.COMPLETED if self.waitstatus == 0 else JobResult.FAILED
        elif name == "exception":
            # The first fatal exception decides the result, as in flux-core's job-list: a job canceled and then
            # failed by a lost rank before its tasks were gone stays CANCELED.
            if int(context.get("severity", 0)) == 0 and self.exception is None:
                self.exception = cast("ExceptionContext", dict(context))  # the journal's JSON, as written
                kind = context.get("type", "")
                self.result = {
                    "cancel": JobResult.CANCELED,
                    "timeout": JobResult.TIMEOUT,
                }.get(kind, JobResult.FAILED)
                if self.state in (JobState.DEPEND, JobState.PRIORITY, JobState.SCHED, JobState.NEW):
                    self.state = JobState.CLEANUP
                    self.t_cleanup = event.timestamp
        elif name == "requeue":
            # Back to the queue: the allocation is gone, the job waits again (lost rank, lead restart).
            self.requeues += 1
            self.ranks, self.cores, self.waitstatus = [], {}, None
            self.result, self.exception = None, None
            self.state = JobState.SCHED
            return
        elif name == "annotate":
            self.extra.update(cast("Annotations", context))  # the event's JSON: annotations by their owner
        if name == "clean":
            self.t_inactive = event.timestamp
        if name in _STATE_AFTER:
            self.state = _STATE_AFTER[name]
            entered = {JobState.DEPEND: "t_depend", JobState.PRIORITY: "t_priority", JobState.SCHED: "t_sched"}
            attribute = entered.get(self.state)
            if attribute and not getattr(self, attribute):
                setattr(self, attribute, event.timestamp)


def replay(events: Iterable[JobEvent]) -> dict[int, JobRecord]:
    """Rebuild every job from the journal, in submission order."""
    jobs: dict[int, JobRecord] = {}
    for event in events:
        if event.name == "submit":
            context = event.context
            jobs[event.jobid] = JobRecord(
                jobid=event.jobid,
                jobspec=context["jobspec"],
                userid=int(context.get("userid", 0)),
                urgency=int(context.get("urgency", 16)),
                t_submit=event.timestamp,
                flags=int(context.get("flags", 0)),
            )
            jobs[event.jobid].extra.update(context.get("extra", {}))
        record = jobs.get(event.jobid)
        if record is not None:
            record.apply(event)
    return jobs
