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
about 2.3 MB of an idle lead's resident memory here. A lead with no state on disk and no setting of theirs to check
serves `job-manager.*` with a stand-in that imports them at the first request (tens of ms, once) and hands that
request on; a lead with a journal or an archive to restore, or a job-manager, sched or content setting, loads them
at start, since the restart path and those settings' checks must run before anything is asked.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from ...protocol import ENOSYS
from ...service import ServiceError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ...port import ModulePort
    from ...service import Request
    from .manager import JobManager

READ_AT_START = ("job-manager.", "sched.", "content.", "job-exec.kill-timeout")
"""Settings the parts check as they are made (a bad value refuses the start): any of them set, they load at start."""


def state_dir(broker: ModulePort) -> str:
    return broker.attrs.get("statedir") or f"{broker.rundir}/state"


def needed_at_start(broker: ModulePort) -> bool:
    """Whether the parts must be made at start: a setting of theirs to check, or saved state to restore."""
    if any(name.startswith(READ_AT_START) for name, _value in broker.attrs.items()):
        return True
    try:
        with os.scandir(state_dir(broker)) as entries:
            return any(True for _entry in entries)
    except FileNotFoundError:
        return False
    except OSError:
        return True  # not a directory, not readable: the parts say so at start, as they always did


class LoadOnFirstRequest:
    """Serves job-manager.* until a request comes: that one loads the job manager (manager.py) and is handed to
    it, and its services answer every later one. A load that fails answers that request and every later one with
    what could not load (logged once), never a silent drop."""

    def __init__(self, broker: ModulePort) -> None:
        self._broker = broker
        self._manager: JobManager | None = None
        self._failure = ""
        os.makedirs(state_dir(broker), exist_ok=True)  # a state directory it cannot make refuses the start, as before
        broker.register("job-manager.*", self.serve)

    def serve(self, request: Request) -> Mapping[str, Any] | None:  # open: whichever service's reply
        handler = self.manager().handlers.get(request.topic)
        if handler is None:  # once loaded, only topics the job manager does not serve come here
            raise ServiceError(ENOSYS, f"{request.topic}: no such service on rank {self._broker.rank}")
        return handler(request)

    def manager(self) -> JobManager:
        if self._manager is not None:
            return self._manager
        if self._failure:
            raise ServiceError(ENOSYS, self._failure)
        try:
            from .manager import JobManager

            self._manager = JobManager(self._broker)
        except Exception as exc:  # whatever the import or the parts raised: said at this request and the next
            self._failure = f"job-manager could not be loaded on first use: {exc!r}"
            self._broker.log(self._failure)
            raise ServiceError(ENOSYS, self._failure) from None
        return self._manager


def job_manager(broker: ModulePort) -> None:
    """Module entry point: the job manager runs on the lead only, made at start where it must be, else on first
    use."""
    if broker.rank != 0:
        return
    if needed_at_start(broker):
        from .manager import JobManager

        JobManager(broker)
    else:
        LoadOnFirstRequest(broker)


__all__ = ["LoadOnFirstRequest", "job_manager", "needed_at_start"]
