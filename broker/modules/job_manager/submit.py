"""Submission: validate, assign a FLUID, journal, and acknowledge only after the group commit."""

from __future__ import annotations

import os
import time

from ...jobs.jobspec import JobspecError, parse_jobspec
from ...jobs.journal import JobEvent
from ...jobs.record import JobRecord
from ...jobs.save_policy import save_policy
from ...protocol import EINVAL
from ...service import Request, ServiceError
from .core import ENOSPC, EPERM, JobManagerCore


class Submit(JobManagerCore):
    def svc_submit(self, req: Request) -> None:
        if not self.submit_enabled:
            raise ServiceError(EPERM, f"job submission is disabled: {self.submit_reason or 'queue disabled'}")
        jobspec = req.get("jobspec", dict)
        urgency = req.get("urgency", int, required=False, default=16)
        if not 0 <= urgency <= 31:
            raise ServiceError(EINVAL, f"urgency: must be between 0 and 31 (got {urgency})")
        try:
            spec = parse_jobspec(jobspec)
        except JobspecError as exc:
            raise ServiceError(EINVAL, f"invalid jobspec: {exc}") from None
        try:
            save_policy(jobspec)
        except ValueError as exc:
            raise ServiceError(EINVAL, f"invalid jobspec: {exc}") from None
        # A burstable job may need more nodes than the instance has: the burst service brings them (bursting/).
        burstable = bool(jobspec.get("attributes", {}).get("system", {}).get("burstable"))
        reason = None if burstable else self.sched.unsatisfiable(spec.resources)
        if reason is not None:
            raise ServiceError(ENOSPC, f"unsatisfiable request: {reason}")
        jobid = self.fluids.next(self.last_id)
        self.last_id = jobid
        userid = req.get("userid", int, required=False, default=os.getuid())
        record = JobRecord(jobid=jobid, jobspec=jobspec, userid=userid, urgency=urgency, t_submit=time.time())
        self.jobs[jobid] = record
        self.active_count += 1
        self.specs[jobid] = spec
        context = {"jobspec": jobspec, "userid": userid, "urgency": urgency, "flags": req.payload.get("flags", 0)}
        event = JobEvent(jobid, "submit", record.t_submit, context)
        record.apply(event)
        self.eventlogs[jobid] = [event]
        self.buffer.append(event)
        self.post(record, "depend")
        self.post(record, "priority", {"priority": self._priority(urgency)})
        self._enqueue(jobid)
        self.sched_dirty = True
        self.acks.append((req, {"id": jobid}))
        self._schedule_flush()
        return None
