"""The job manager put together: its parts made, wired and their services registered (the package's
__init__ says what each part owns, and loads this module at start or on the first request)."""

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
    from ...service import Handler


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
        services: dict[str, Handler] = {
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
        }
        self.handlers = {f"job-manager.{topic}": handler for topic, handler in services.items()}
        """Every service it serves, by topic: what a request that loaded it on first use is handed to."""
        for topic, handler in self.handlers.items():
            broker.register(topic, handler)
        self.queue_state = QueueStateService(broker, self.table, self.queue, self.executions)
        self.handlers["job-manager.queue-state"] = self.queue_state.svc_queue_state
        self.handlers["job-manager.drain"] = self.queue_state.svc_drain

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
