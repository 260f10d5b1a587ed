"""The restart path: rebuild every job from the saved state and settle what a lead restart interrupted."""

from __future__ import annotations

from ...jobs.journal import JobEvent
from ...jobs.record import replay
from ...jobs.states import JobState
from .core import KILLED, LOST_NOTE, JobManagerCore


class Restart(JobManagerCore):
    def _recover(self, events: list[JobEvent]) -> None:
        """The one restore path: rebuild every job from its saved events, then settle what was interrupted (a
        job the lead was running when it stopped is requeued or failed, never silently dropped)."""
        self.jobs = replay(events)
        for event in events:
            if event.jobid in self.jobs:
                self.eventlogs.setdefault(event.jobid, []).append(event)
        self.active_count = sum(1 for r in self.jobs.values() if r.state != JobState.INACTIVE)
        for jobid, record in self.jobs.items():
            self.last_id = max(self.last_id, jobid)
            state = record.state
            if state == JobState.DEPEND:
                self.post(record, "depend")
            if record.state == JobState.PRIORITY:
                self.post(record, "priority", {"priority": self._priority(record.urgency)})
            if record.state == JobState.SCHED:
                self._enqueue(jobid)
            elif record.state == JobState.RUN:
                self.orphans.add(jobid)
                if self.restart_policy == "requeue" or self._requeue_allowed(record):
                    self.post(record, "exception", {"type": "exec", "severity": 1, "note": LOST_NOTE})
                    self.post(record, "requeue", {})
                    self._enqueue(jobid)
                else:
                    self.post(record, "exception", {"type": "exec", "severity": 0, "note": LOST_NOTE})
                    self.post(record, "finish", {"status": KILLED})
                    self._post_release(record)
            elif record.state == JobState.CLEANUP:
                self._post_release(record)
        if self.buffer:
            self.flush()
