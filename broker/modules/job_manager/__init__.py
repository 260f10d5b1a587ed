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
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ...attributes import AttrError
from ...jobs.store import JobStore
from .executions import Executions
from .queries import Queries
from .queue import JobQueue
from .queue_state import QueueStateService
from .restart import recover
from .saver import Saver
from .table import JobTable
from .warmer import ViewWarmer
from .watches import Watches

if TYPE_CHECKING:
    from ...port import ModulePort


class JobManager:
    """The job manager: its parts put together, and its services registered. Each part is given the broker's
    narrow port (port.BrokerPort) and the collaborators it needs, never this object (roles.py says what each asks
    of the others); the parts made before their collaborators get them through `wire`."""

    def __init__(self, broker: ModulePort) -> None:
        self.broker = broker
        statedir = Path(broker.attrs.get("statedir") or f"{broker.rundir}/state")
        # first: a restored archive is unpacked before the store is read
        self.saver = Saver(broker, statedir, broker.on_online)
        store = JobStore(statedir, fsync=broker.attrs.boolean("job-manager.fsync", True))
        saved = store.restore(now_ms=int(broker.starttime * 1000))
        self.table = JobTable(broker, store, saved.epoch_ms, self.committed)
        self.queue = JobQueue(broker, broker, lambda: broker.online, self.table, saved.queue)
        self.watches = Watches(self.table, self.queue)
        self.executions = Executions(broker, self.table, self.queue, self.watches, self.saver)
        self.warmer = ViewWarmer(broker.loop, lambda jobid, kinds: self.queries.render_ahead(jobid, kinds))
        self.queries = Queries(
            lambda: broker.hostnames, broker.burst_view, self.table, self.queue, self.executions, self.warmer
        )
        self.queue.wire(self.executions, self.watches)
        self.watches.wire(self.executions, self.queries)
        self.saver.wire(self.table, self.queue, self.executions)
        recover(self.table, self.queue, self.executions, self.watches, saved.events, restart_policy(broker))
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
            "wait-all": self.watches.svc_wait_all,
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
        self.queue_state = QueueStateService(broker, self.table, self.queue, self.executions)

    def committed(self, touched: set[int]) -> None:
        """After each group commit (JobTable.flush): answer watchers, schedule, check idle waits and a save."""
        self.watches.committed(touched)
        self.warmer.touched(touched)
        self.queue.committed(touched)
        self.watches.check_idle()
        self.saver.check()


RESTART_POLICIES = ("fail", "requeue")


def restart_policy(broker: ModulePort) -> str:
    """What a lead restart does to the jobs it was running (restart.py); a misspelling is refused at start."""
    policy = broker.attrs.get("job-manager.restart-policy") or "fail"
    if policy not in RESTART_POLICIES:
        raise AttrError(f"attribute job-manager.restart-policy: expected fail or requeue, got {policy!r}")
    return policy


def job_manager(broker: ModulePort) -> None:
    """Module entry point: the job manager runs on the lead only."""
    if broker.rank == 0:
        JobManager(broker)


__all__ = ["JobManager", "job_manager"]
