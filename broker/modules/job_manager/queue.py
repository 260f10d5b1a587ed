"""The queue: submission, priority order, the scheduling pass over the pure queue policies
(elasticity/policy/queue.py), urgency, and `flux queue` (start/stop/enable/disable/policy)."""

from __future__ import annotations

import bisect
import contextlib
import os
import time
from collections.abc import Callable, Set

from elasticity.policy.queue import Waiting

from ...jobs import submit_flags
from ...jobs.jobid import encode_f58
from ...jobs.jobspec import JobspecError, parse_jobspec
from ...jobs.malleable import malleable_spec
from ...jobs.save_policy import save_policy
from ...jobs.shapes import QueueStatus
from ...jobs.states import JobState
from ...jobs.store import QueueState
from ...port import BrokerPort
from ...protocol import EINVAL, EPERM
from ...service import Request, ServiceError
from ..drains import DrainError, DrainMode, describe
from ..scheduler import ClusterView, Scheduler
from .replies import UrgencyReply
from .roles import ExecutionsRole, WatchesRole
from .table import JobTable

ENOSPC = 28
EAGAIN = 11
ACTIVE_LIMIT = "job-manager.active-num-limit"
"""The most active jobs (submitted, not yet inactive) the queue holds; a submit past it is refused (EAGAIN).
Named after flux-core's `job-manager.inactive-num-limit`; 0 means no limit."""
DEFAULT_ACTIVE_LIMIT = 100_000


def queue_full(limit: int) -> str:
    """Why a submit was refused at the limit: the number, the attribute that sets it, what to do."""
    return (
        f"the queue is full: {limit} active jobs is the limit ({ACTIVE_LIMIT}); submit more as jobs finish, "
        f"or start the instance with a higher -S{ACTIVE_LIMIT}"
    )


def priority(urgency: int) -> int:
    """Flux's default priority plugin: priority = urgency, 0 = held, 31 = expedite (highest)."""
    return 2**32 - 1 if urgency == 31 else urgency


class JobQueue:
    """The pending jobs in order, the scheduler, whether the queue runs and takes submissions, and the
    "waiting for drained ranks" reasons it gave."""

    def __init__(
        self,
        port: BrokerPort,
        cluster: ClusterView,
        online: Callable[[], bool],
        table: JobTable,
        saved: QueueState,
    ) -> None:
        self._port = port
        self._cluster = cluster
        self._online = online
        self._table = table
        self._executions: ExecutionsRole | None = None
        self._watches: WatchesRole | None = None
        self._sched = Scheduler(cluster, port.attrs.get("sched.queue-policy", "fcfs") or "fcfs")
        self._pending: set[int] = set()  # jobs in SCHED
        self._order: list[int] | None = None  # the queue sorted by priority, then submission
        self._depth = port.attrs.integer("sched.queue-depth", 256, minimum=1) or 256
        self._active_limit = port.attrs.integer(ACTIVE_LIMIT, DEFAULT_ACTIVE_LIMIT) or 0
        self._dirty = False
        self._fresh: set[int] = set()
        """Jobs submitted whose submit event is not on disk yet: none starts before it is (see committed)."""
        self._soon = False
        self._started = True
        self._stop_reason = ""
        self._enabled = True
        self._enable_reason = ""
        self._drain_noted: dict[int, str] = {}
        """Pending jobs given "waiting for drained ranks" as their reason, and the words given."""
        # A stopped or disabled queue stays so across a lead restart (as in Flux).
        self._started, self._stop_reason = saved.started, saved.stop_reason
        self._enabled, self._enable_reason = saved.enabled, saved.enable_reason
        if saved.policy:
            with contextlib.suppress(ValueError):
                self._sched = Scheduler(cluster, saved.policy, self._sched.drains)

    def wire(self, executions: ExecutionsRole, watches: WatchesRole) -> None:
        """The parts made after this one: the running jobs (what holds resources, starting one) and the watches."""
        self._executions = executions
        self._watches = watches

    @property
    def _execs(self) -> ExecutionsRole:
        assert self._executions is not None, "JobQueue.wire was not called"
        return self._executions

    # ------------------------------------------------------------------ what others read and ask
    @property
    def sched(self) -> Scheduler:
        return self._sched

    def pending(self) -> Set[int]:
        return self._pending

    def enqueue(self, jobid: int) -> None:
        """Into the queue, and into its kept order at its place: re-sorting the whole queue at each submit made
        every submit cost O(n log n) in the queue's length (submits slowed as the queue filled, issue 27)."""
        in_step = self._order is not None and jobid not in self._pending and len(self._order) == len(self._pending)
        self._pending.add(jobid)
        if in_step and self._order is not None:  # the order holds exactly the queue: no stale entry, no twin
            table = self._table
            bisect.insort(self._order, jobid, key=lambda j: (-table[j].priority, j))
        else:
            self._order = None

    def dequeue(self, jobid: int) -> None:
        self._pending.discard(jobid)

    def mark_dirty(self) -> None:
        """Run a scheduling pass after the next commit."""
        self._dirty = True

    def kick(self) -> None:
        """Run a scheduling pass soon."""
        self._dirty = True
        self._table.schedule_flush()

    def schedule_soon(self) -> None:
        """A job ended and its resources are free: a pass at the end of this turn of the loop, not after the next
        commit. Waiting for the journal's fsync before the next job could start was about a fifth of the time of
        `flux submit --cc=1-1000 --wait true` here (issue 45); nothing needs it: the jobs that may start are
        already on disk (a fresh submission waits for its commit), and the ended job's events reach the journal
        before the next one's, in order, as they always did."""
        if not self._soon:
            self._soon = True
            self._port.loop.call_later(0, self._soon_pass)

    def _soon_pass(self) -> None:
        self._soon = False
        self.schedule()

    def take_drain_note(self, jobid: int) -> bool:
        """Forget the drained-ranks reason given to a job; whether there was one."""
        return bool(self._drain_noted.pop(jobid, None))

    def drain(self, mode: DrainMode, ranks: list[int], reason: str) -> frozenset[int]:
        """Drain or undrain ranks (drains.DrainTable.apply), then schedule: the ranks drained now."""
        try:
            self._sched.drains.apply(mode, ranks, reason, time.time())
        except DrainError as exc:
            raise ServiceError(EINVAL, f"{exc}") from None
        self.kick()
        return self._sched.drained

    def interrupted_by(self, reason: str) -> bool:
        return reason in (self._stop_reason, self._enable_reason)

    def stop(self, reason: str) -> None:
        """Stop scheduling and submissions (kept across a restart)."""
        self._started, self._stop_reason = False, reason
        self._enabled, self._enable_reason = False, reason
        self._save_state()

    def resume(self) -> None:
        self._started, self._stop_reason = True, ""
        self._enabled, self._enable_reason = True, ""
        self._save_state()

    def _save_state(self) -> None:
        state = QueueState(
            started=self._started,
            stop_reason=self._stop_reason,
            enabled=self._enabled,
            enable_reason=self._enable_reason,
            policy=self._sched.policy,
        )
        self._table.save_queue(state)

    # ------------------------------------------------------------------ scheduling
    def committed(self, touched: Set[int]) -> None:
        """These jobs' events are on disk: fresh submissions among them may start. Then a pass if one is due."""
        if self._fresh:
            self._fresh.difference_update(touched)
        self.schedule_if_dirty()

    def schedule_if_dirty(self) -> None:
        if self._dirty:
            self.schedule()

    def schedule(self) -> None:
        self._dirty = False
        if not self._started or not self._pending or not self._online():
            return
        table = self._table
        if self._order is None or len(self._order) > 2 * len(self._pending) + 64:
            self._order = sorted(self._pending, key=lambda j: (-table[j].priority, j))
        order = self._order
        if len(order) != len(self._pending):
            # the jobs gone since the last pass are mostly the head's (started): drop those in place, and filter the
            # whole order only if some left from further back (a 5,000-job queue filtered at every pass: O(n^2))
            head = 0
            while head < len(order) and order[head] not in self._pending:
                head += 1
            del order[:head]
            if len(order) != len(self._pending):
                self._order = [j for j in order if j in self._pending]
        # Like Flux's queue-depth: only the head of the queue is considered in one pass (FCFS can start at
        # most one job per free core; EASY looks further for backfill candidates).
        nodes = self._sched.nodes()
        free_cores = sum(len(n.cores) for n in nodes.values() if n.up)
        depth = self._depth if self._sched.policy == "easy" else min(self._depth, free_cores + 1)
        waiting = []
        for jobid in self._order:
            if jobid in self._fresh:  # not on disk yet: it and those after it wait for the commit's pass
                self._dirty = True
                break
            record = table[jobid]
            if record.priority <= 0:
                continue  # held
            spec = table.spec(record)
            waiting.append(Waiting(jobid, spec.resources, spec.duration))
            if len(waiting) >= depth:
                break
        if not waiting:
            return
        started = set()
        for jobid, allocation in self._sched.plan(waiting, self._execs.holding(), nodes=nodes).start:
            self._pending.discard(jobid)
            self._execs.start(table[jobid], allocation)
            started.add(jobid)
        self._note_drains([w for w in waiting if w.jobid not in started])

    def _note_drains(self, waiting: list[Waiting]) -> None:
        """Give the jobs that wait for drained ranks that reason (`flux jobs` INFO, sched.reason_pending), and take
        it back once they no longer do. A reason someone else set (a burst) is left alone."""
        if not self._drain_noted and not self._sched.drained:
            return  # nothing drained and no reason of ours to take back: every job would be skipped below
        held = self._sched.held_by_drains(waiting, self._execs.holding())
        text = ""
        if held:
            drains = self._sched.drains.entries
            text = "waiting for drained ranks " + describe({r: d.reason for r, d in drains.items()})
        for job in waiting:
            want = text if job.jobid in held else ""
            noted = self._drain_noted.get(job.jobid, "")
            if want == noted:
                continue
            record = self._table[job.jobid]
            current = str((record.extra.get("sched") or {}).get("reason_pending") or "")
            if current != noted:  # another reason came since: not ours to change
                self._drain_noted.pop(job.jobid, None)
                if current:
                    continue
            self._table.post(record, "annotate", {"sched": {"reason_pending": want}})
            if want:
                self._drain_noted[job.jobid] = want
            else:
                self._drain_noted.pop(job.jobid, None)

    # ------------------------------------------------------------------ services
    def svc_submit(self, req: Request) -> None:
        """Validate, assign a FLUID, journal, and acknowledge only after the group commit."""
        if not self._enabled:
            raise ServiceError(EPERM, f"job submission is disabled: {self._enable_reason or 'queue disabled'}")
        if self._active_limit and self._table.active_count >= self._active_limit:
            raise ServiceError(EAGAIN, queue_full(self._active_limit))
        jobspec = req.get("jobspec", dict)
        urgency = req.get("urgency", int, required=False, default=16)
        if not 0 <= urgency <= 31:
            raise ServiceError(EINVAL, f"urgency: must be between 0 and 31 (got {urgency})")
        flags = req.get("flags", int, required=False, default=0)
        if flags < 0 or flags & ~submit_flags.KNOWN:
            raise ServiceError(EINVAL, f"flags: unknown flag bits {flags:#x} (known: {submit_flags.KNOWN:#x})")
        self._table.share_environment(jobspec)
        try:
            spec = parse_jobspec(jobspec)
        except JobspecError as exc:
            raise ServiceError(EINVAL, f"invalid jobspec: {exc}") from None
        try:
            save_policy(jobspec)
            malleable = malleable_spec(jobspec)
        except ValueError as exc:
            raise ServiceError(EINVAL, f"invalid jobspec: {exc}") from None
        if malleable and spec.resources.nnodes and not malleable.min <= spec.resources.nnodes <= malleable.max:
            raise ServiceError(
                EINVAL,
                f"invalid jobspec: {spec.resources.nnodes} nodes (-N) is outside attributes.system.malleable "
                f"[min, max] = [{malleable.min}, {malleable.max}]",
            )
        # A burstable job may need more nodes than the instance has: the burst service brings them (bursting/).
        burstable = bool(jobspec.get("attributes", {}).get("system", {}).get("burstable"))
        reason = None if burstable else self._sched.unsatisfiable(spec.resources)
        if reason is not None:
            raise ServiceError(ENOSPC, f"unsatisfiable request: {reason}")
        userid = req.get("userid", int, required=False, default=os.getuid())
        table = self._table
        record = table.create(jobspec, spec, userid, urgency, flags)
        assert self._watches is not None, "JobQueue.wire was not called"
        self._watches.submitted(record)
        table.post(record, "depend")
        table.post(record, "priority", {"priority": priority(urgency)})
        self.enqueue(record.jobid)
        self._fresh.add(record.jobid)
        self._dirty = True
        table.ack_after_commit(req, {"id": record.jobid})
        return None

    def svc_urgency(self, req: Request) -> UrgencyReply:
        record = self._table.record(req)
        urgency = req.get("urgency", int)
        if not 0 <= urgency <= 31:
            raise ServiceError(EINVAL, f"urgency: must be between 0 and 31 (got {urgency})")
        if not record.state & (JobState.DEPEND | JobState.PRIORITY | JobState.SCHED):
            raise ServiceError(EINVAL, f"{encode_f58(record.jobid)}: urgency cannot be changed once running")
        old = record.urgency
        self._table.post(record, "urgency", {"urgency": urgency})
        self._table.post(record, "priority", {"priority": priority(urgency)})
        self._order = None
        self.kick()
        return {"old_urgency": old}

    def svc_queue(self, req: Request) -> QueueStatus:
        action = req.get("action", str, required=False, default="status")
        reason = req.get("reason", str, required=False, default="")
        if action == "start":
            self._started, self._stop_reason = True, ""
            self.kick()
        elif action == "stop":
            self._started, self._stop_reason = False, reason
        elif action == "enable":
            self._enabled, self._enable_reason = True, ""
        elif action == "disable":
            self._enabled, self._enable_reason = False, reason
        elif action == "policy":
            try:
                self._sched = Scheduler(self._cluster, reason, self._sched.drains)
            except ValueError as exc:
                raise ServiceError(EINVAL, str(exc)) from None
            self.kick()
        elif action != "status":
            raise ServiceError(EINVAL, f"unknown queue action {action!r}")
        if action != "status":
            self._save_state()
        return {
            "enabled": self._enabled,
            "enable_reason": self._enable_reason,
            "started": self._started,
            "stop_reason": self._stop_reason,
            "policy": self._sched.policy,
            "pending": len(self._pending),
            "running": self._execs.count(),
        }
