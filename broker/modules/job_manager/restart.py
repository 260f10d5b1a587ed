"""The restart path: rebuild every job from the saved state and settle what a lead restart interrupted."""

from __future__ import annotations

from ...jobs.journal import JobEvent
from ...jobs.states import JobState
from .executions import KILLED, requeue_allowed
from .queue import priority
from .roles import ExecutionsRole, QueueRole, WatchesRole
from .table import JobTable

LOST_NOTE = "lead broker restarted while the job was running; its tasks were lost"


def recover(
    table: JobTable,
    queue: QueueRole,
    executions: ExecutionsRole,
    watches: WatchesRole,
    events: list[JobEvent],
    restart_policy: str,
) -> None:
    """The one restore path: rebuild every job from its saved events, then settle what was interrupted (a
    job the lead was running when it stopped is requeued or failed, never silently dropped)."""
    table.recover(events)
    for record in list(table.records()):
        jobid = record.jobid
        if record.state != JobState.INACTIVE:
            watches.submitted(record)
        if record.state == JobState.DEPEND:
            table.post(record, "depend")
        if record.state == JobState.PRIORITY:
            table.post(record, "priority", {"priority": priority(record.urgency)})
        if record.state == JobState.SCHED:
            queue.enqueue(jobid)
        elif record.state == JobState.RUN:
            executions.adopt_orphan(jobid)
            if restart_policy == "requeue" or requeue_allowed(record):
                table.post(record, "exception", {"type": "exec", "severity": 1, "note": LOST_NOTE})
                table.post(record, "requeue", {})
                queue.enqueue(jobid)
            else:
                table.post(record, "exception", {"type": "exec", "severity": 0, "note": LOST_NOTE})
                table.post(record, "finish", {"status": KILLED})
                executions.release(record)
        elif record.state == JobState.CLEANUP:
            executions.release(record)
    if table.unflushed():
        table.flush()
