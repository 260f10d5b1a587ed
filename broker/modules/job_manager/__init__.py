"""job-manager, on the lead (rank 0): submission, the journal, the life cycle, scheduling, exec, output, waits.

As in flux-core's job manager, one module per concern, and each concern a part that owns its state (private to
it; the others ask through small methods; tests/broker/test_job_manager_parts.py checks this):

- table.py: records, eventlogs, the journal's group commit and the store (the only writer of records)
- queue.py: submission, pending order, the scheduler, whether the queue runs and takes submissions, urgency
- executions.py: running jobs, their output, exceptions and kills, completion, the one requeue
- watches.py: deferred replies (job wait, output/eventlog watches, annotation and queue-idle waits), answered
  when the job reaches the point asked for, so clients never poll
- saver.py: save and restore of the queue
- queries.py (list, info, stats; no state) and restart.py (the one restore path; no state)
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ...attributes import AttrError
from ...jobs.store import JobStore
from .. import queue_state
from .executions import Executions
from .queries import Queries
from .queue import JobQueue
from .restart import recover
from .saver import Saver
from .table import JobTable
from .warmer import ViewWarmer
from .watches import Watches

if TYPE_CHECKING:
    from ...broker import Broker


class JobManager:
    """The job manager: its parts put together, and its services registered."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.saver = Saver(self, broker)  # first: a restored archive is unpacked before the store is read
        statedir = Path(broker.attrs.get("statedir") or f"{broker.rundir}/state")
        store = JobStore(statedir, fsync=broker.attrs.boolean("job-manager.fsync", True))
        saved = store.restore(now_ms=int(broker.starttime * 1000))
        self.table = JobTable(self, broker, store, saved.epoch_ms)
        self.queue = JobQueue(self, broker, saved.queue)
        self.executions = Executions(self, broker)
        self.watches = Watches(self, broker)
        self.queries = Queries(self, broker)
        self.warmer = ViewWarmer(broker.loop, self.queries.render_ahead)
        recover(self, saved.events, restart_policy(broker))
        broker.subscribe("membership.update", self.executions.on_membership)
        broker.subscribe("membership.update", self.watches.on_membership)
        broker.on_online(self.queue.kick)
        broker.on_client_gone(self.watches.client_gone)
        broker.on_close(self.table.close)
        broker.on_close(self.warmer.close)
        self.saver.started()
        for topic, handler in {
            "submit": self.queue.svc_submit,
            "list": self.queries.svc_list,
            "info": self.queries.svc_info,
            "cancel": self.executions.svc_cancel,
            "raise": self.executions.svc_raise,
            "kill": self.executions.svc_kill,
            "wait": self.watches.svc_wait,
            "output": self.watches.svc_output,
            "eventlog": self.watches.svc_eventlog,
            "urgency": self.queue.svc_urgency,
            "queue": self.queue.svc_queue,
            "queue-idle": self.watches.svc_queue_idle,
            "annotate": self.queries.svc_annotate,
            "annotation-wait": self.watches.svc_annotation_wait,
            "stats": self.queries.svc_stats,
            "history.get": self.queries.svc_history,
            "exec-output": self.executions.svc_exec_output,
            "exec-done": self.executions.svc_exec_done,
            "save": self.saver.svc_save,
        }.items():
            broker.register(f"job-manager.{topic}", handler)
        queue_state.register(self)

    def committed(self, touched: set[int]) -> None:
        """After each group commit (JobTable.flush): answer watchers, schedule, check idle waits and a save."""
        self.watches.committed(touched)
        self.warmer.touched(touched)
        self.queue.schedule_if_dirty()
        self.watches.check_idle()
        self.saver.check()


RESTART_POLICIES = ("fail", "requeue")


def restart_policy(broker: Broker) -> str:
    """What a lead restart does to the jobs it was running (restart.py); a misspelling is refused at start."""
    policy = broker.attrs.get("job-manager.restart-policy") or "fail"
    if policy not in RESTART_POLICIES:
        raise AttrError(f"attribute job-manager.restart-policy: expected fail or requeue, got {policy!r}")
    return policy


def job_manager(broker: Broker) -> None:
    """Module entry point: the job manager runs on the lead only."""
    if broker.rank == 0:
        JobManager(broker)


__all__ = ["JobManager", "job_manager"]
