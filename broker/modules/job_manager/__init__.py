"""job-manager, on the lead (rank 0): submission, the journal, the life cycle, scheduling, exec, output, waits.

As in flux-core's job manager, one module per concern, and each concern a part that owns its state (private to
it; the others ask through small methods; tests/broker/test_job_manager_parts.py checks this):

- table.py: records, eventlogs, the journal's group commit and the store (the only writer of records)
- queue.py: submission, pending order, the scheduler, whether the queue runs and takes submissions, urgency
- executions.py: running jobs, their output, exceptions and kills, completion, the one requeue
- watches.py: deferred replies (job wait, output/eventlog watches, annotation and queue-idle waits), answered
  when the job reaches the point asked for, so clients never poll
- saver.py: save and restore of the queue
- queries.py (list, info, stats; no state), queue_state.py (queue-state and drain for autoscalers; no state) and
  restart.py (the one restore path; no state)
- roles.py: what the parts ask of one another (protocols); each part gets the broker's port and its collaborators
- manager.py: the parts put together (JobManager)

Loaded on first use (issue 45, an idle lead's memory): the parts, the job store and the scheduling policies are
about 1.5 MB of an idle lead's resident memory here. A lead with no state on disk and no setting of theirs to
check serves `job-manager.*` with a stand-in (broker/modules/first_use.py) that imports them at the first request
(tens of ms, once) and hands that request on; a lead with a journal or an archive to restore, or a job-manager,
sched or content setting, loads them at start, since the restart path and those settings' checks must run before
anything is asked.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ..first_use import LoadOnFirstRequest, holds_anything, settings_under

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ...port import ModulePort
    from ...service import Handler

READ_AT_START = ("job-manager.", "sched.", "content.", "job-exec.kill-timeout")
"""Settings the parts check as they are made (a bad value refuses the start): any of them set, they load at start."""


def state_dir(broker: ModulePort) -> str:
    return broker.attrs.get("statedir") or f"{broker.rundir}/state"


def needed_at_start(broker: ModulePort) -> bool:
    """Whether the parts must be made at start: a setting of theirs to check, or saved state to restore."""
    return settings_under(broker, READ_AT_START) or holds_anything(state_dir(broker))


def job_manager(broker: ModulePort) -> None:
    """Module entry point: the job manager runs on the lead only, made at start where it must be, else on first
    use."""
    if broker.rank != 0:
        return
    if needed_at_start(broker):
        load(broker)
    else:
        os.makedirs(state_dir(broker), exist_ok=True)  # a state directory it cannot make refuses the start
        LoadOnFirstRequest(broker, "job-manager", lambda: load(broker))


def load(broker: ModulePort) -> Mapping[str, Handler]:
    from .manager import JobManager

    return JobManager(broker).handlers


__all__ = ["job_manager", "needed_at_start"]
