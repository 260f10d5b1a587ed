"""job-manager, on the lead (rank 0): submission, the journal, the life cycle, scheduling, exec, output, waits.

Split by concern as flux-core's job manager is (see core.py). Long waits (job wait, output/eventlog watch, queue
idle, annotation wait) are deferred replies: the request is kept and answered when the job reaches the point
asked for, so clients never poll.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import queue_state
from .journal import JournalFeeds
from .kill import Kill
from .queue import Queue
from .restart import Restart
from .start import Start
from .submit import Submit
from .wait import Waits

if TYPE_CHECKING:
    from ...broker import Broker


class JobManager(Submit, Queue, Start, Kill, JournalFeeds, Waits, Restart):
    """The job manager: its concerns put together, and its services registered."""

    def __init__(self, broker: Broker) -> None:
        super().__init__(broker)
        for topic, handler in {
            "submit": self.svc_submit,
            "list": self.svc_list,
            "info": self.svc_info,
            "cancel": self.svc_cancel,
            "raise": self.svc_raise,
            "kill": self.svc_kill,
            "wait": self.svc_wait,
            "output": self.svc_output,
            "eventlog": self.svc_eventlog,
            "urgency": self.svc_urgency,
            "queue": self.svc_queue,
            "queue-idle": self.svc_queue_idle,
            "annotate": self.svc_annotate,
            "annotation-wait": self.svc_annotation_wait,
            "stats": self.svc_stats,
            "exec-output": self.svc_exec_output,
            "exec-done": self.svc_exec_done,
        }.items():
            broker.register(f"job-manager.{topic}", handler)
        queue_state.register(self)


def job_manager(broker: Broker) -> None:
    """Module entry point: the job manager runs on the lead only."""
    if broker.rank == 0:
        JobManager(broker)


__all__ = ["JobManager", "job_manager"]
