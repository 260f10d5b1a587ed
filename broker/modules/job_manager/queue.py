"""The queue: priority order, the scheduling pass over the pure queue policies (elasticity/policy/queue.py),
urgency, and `flux queue` (start/stop/enable/disable/policy, idle waits)."""

from __future__ import annotations

import bisect
import contextlib
import time
from typing import Any

from elasticity.policy.queue import Waiting

from ...jobs.jobid import encode_f58
from ...jobs.states import JobState
from ...jobs.store import QueueState
from ...protocol import EINVAL
from ...service import Request, ServiceError
from ..drains import describe
from ..scheduler import Scheduler
from .core import JobManagerCore


class Queue(JobManagerCore):
    def schedule(self) -> None:
        self.sched_dirty = False
        if not self.sched_started or not self.queue or not self.b.online:
            return
        if self._order is None or len(self._order) > 2 * len(self.queue) + 64:
            self._order = sorted(self.queue, key=lambda j: (-self.jobs[j].priority, j))
        self._order = (
            [j for j in self._order if j in self.queue] if len(self._order) != len(self.queue) else self._order
        )
        # Like Flux's queue-depth: only the head of the queue is considered in one pass (FCFS can start at
        # most one job per free core; EASY looks further for backfill candidates).
        free_cores = sum(len(n.cores) for n in self.sched.nodes().values() if n.up)
        depth = self.queue_depth if self.sched.policy == "easy" else min(self.queue_depth, free_cores + 1)
        waiting = []
        for jobid in self._order:
            record = self.jobs[jobid]
            if record.priority <= 0:
                continue  # held
            spec = self._spec(record)
            waiting.append(Waiting(jobid, spec.resources, spec.duration))
            if len(waiting) >= depth:
                break
        if not waiting:
            return
        started = set()
        for jobid, allocation in self.sched.plan(waiting, self._holding()).start:
            self._start(self.jobs[jobid], allocation)
            started.add(jobid)
        self._note_drains([w for w in waiting if w.jobid not in started])

    def _holding(self) -> list[tuple[int, dict[int, list[int]], float, float]]:
        """(jobid, allocation, t_run, duration) of every job holding resources."""
        return [
            (jobid, self.jobs[jobid].cores, self.jobs[jobid].t_run, ex.spec.duration)
            for jobid, ex in self.execs.items()
        ]

    def _note_drains(self, waiting: list[Waiting]) -> None:
        """Give the jobs that wait for drained ranks that reason (`flux jobs` INFO, sched.reason_pending), and take
        it back once they no longer do. A reason someone else set (a burst) is left alone."""
        held = self.sched.held_by_drains(waiting, self._holding())
        text = ""
        if held:
            drains = self.sched.drains.entries
            text = "waiting for drained ranks " + describe({r: d.reason for r, d in drains.items()})
        for job in waiting:
            want = text if job.jobid in held else ""
            noted = self.drain_noted.get(job.jobid, "")
            if want == noted:
                continue
            record = self.jobs[job.jobid]
            current = str((record.extra.get("sched") or {}).get("reason_pending") or "")
            if current != noted:  # another reason came since: not ours to change
                self.drain_noted.pop(job.jobid, None)
                if current:
                    continue
            self.post(record, "annotate", {"sched": {"reason_pending": want}})
            if want:
                self.drain_noted[job.jobid] = want
            else:
                self.drain_noted.pop(job.jobid, None)

    def _enqueue(self, jobid: int) -> None:
        """Into the queue, and into its kept order at its place: re-sorting the whole queue at each submit made
        every submit cost O(n log n) in the queue's length (submits slowed as the queue filled, issue 27)."""
        in_step = self._order is not None and jobid not in self.queue and len(self._order) == len(self.queue)
        self.queue.add(jobid)
        if in_step and self._order is not None:  # the order holds exactly the queue: no stale entry, no twin
            bisect.insort(self._order, jobid, key=lambda j: (-self.jobs[j].priority, j))
        else:
            self._order = None

    def svc_urgency(self, req: Request) -> dict[str, Any]:
        record = self._record(req)
        urgency = req.get("urgency", int)
        if not 0 <= urgency <= 31:
            raise ServiceError(EINVAL, f"urgency: must be between 0 and 31 (got {urgency})")
        if not record.state & (JobState.DEPEND | JobState.PRIORITY | JobState.SCHED):
            raise ServiceError(EINVAL, f"{encode_f58(record.jobid)}: urgency cannot be changed once running")
        old = record.urgency
        self.post(record, "urgency", {"urgency": urgency})
        self.post(record, "priority", {"priority": self._priority(urgency)})
        self._order = None
        self.kick_sched()
        return {"old_urgency": old}

    def _apply_queue_state(self, state: QueueState) -> None:
        """A stopped or disabled queue stays so across a lead restart (as in Flux)."""
        self.sched_started, self.sched_reason = state.started, state.stop_reason
        self.submit_enabled, self.submit_reason = state.enabled, state.enable_reason
        if state.policy:
            with contextlib.suppress(ValueError):
                self.sched = Scheduler(self.b, state.policy, self.sched.drains)

    def _save_queue_state(self) -> None:
        state = QueueState(
            started=self.sched_started,
            stop_reason=self.sched_reason,
            enabled=self.submit_enabled,
            enable_reason=self.submit_reason,
            policy=self.sched.policy,
        )
        self.store.save_queue(state, time.time())

    def svc_queue(self, req: Request) -> dict[str, Any]:
        action = req.get("action", str, required=False, default="status")
        reason = req.get("reason", str, required=False, default="")
        if action == "start":
            self.sched_started, self.sched_reason = True, ""
            self.kick_sched()
        elif action == "stop":
            self.sched_started, self.sched_reason = False, reason
        elif action == "enable":
            self.submit_enabled, self.submit_reason = True, ""
        elif action == "disable":
            self.submit_enabled, self.submit_reason = False, reason
        elif action == "policy":
            try:
                self.sched = Scheduler(self.b, reason, self.sched.drains)
            except ValueError as exc:
                raise ServiceError(EINVAL, str(exc)) from None
            self.kick_sched()
        elif action != "status":
            raise ServiceError(EINVAL, f"unknown queue action {action!r}")
        if action != "status":
            self._save_queue_state()
        return {
            "enabled": self.submit_enabled,
            "enable_reason": self.submit_reason,
            "started": self.sched_started,
            "stop_reason": self.sched_reason,
            "policy": self.sched.policy,
            "pending": len(self.queue),
            "running": len(self.execs),
        }

    def svc_queue_idle(self, req: Request) -> None:
        mode = req.get("mode", str, required=False, default="idle")
        self.idle_watch.append((req, mode))
        self._check_idle()
        return None

    def _check_idle(self) -> None:
        if not self.idle_watch:
            return
        active = self.active_count
        keep = []
        for req, mode in self.idle_watch:
            done = not self.execs if mode == "idle" else active == 0
            if done:
                req.respond({"pending": len(self.queue), "running": len(self.execs)})
            else:
                keep.append((req, mode))
        self.idle_watch = keep
