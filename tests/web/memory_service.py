"""An in-memory JobService for the fast page tests: jobs are records the test sets, owned by real uids."""

from __future__ import annotations

import time
from typing import Any

from broker.client import FluxError
from broker.jobs.api import JobInfo
from broker.rest.jobs import SubmitRequest


class MemoryJobService:
    def __init__(self) -> None:
        self.records: dict[int, JobInfo] = {}
        self.outputs: dict[int, list[str]] = {}
        self.submitted: list[tuple[SubmitRequest, int]] = []
        self.next_id = 1000

    def add(self, name: str, userid: int, state: str = "INACTIVE", result: str = "COMPLETED") -> JobInfo:
        self.next_id += 1
        job = JobInfo(
            id=self.next_id, state=state, result=result if state == "INACTIVE" else "", returncode=0,
            nnodes=1, ntasks=1, nodelist="pod-0", runtime=0.5, name=name, userid=userid, urgency=16,
            priority=16, t_submit=time.time(), t_run=time.time(), t_cleanup=0.0, t_inactive=0.0,
        )  # fmt: skip
        self.records[job.id] = job
        self.outputs[job.id] = [f"output of {name}\n"]
        return job

    def submit(self, request: SubmitRequest, userid: int) -> int:
        self.submitted.append((request, userid))
        return self.add(request.command[0], userid, state="SCHED").id

    def jobs(self) -> list[JobInfo]:
        return sorted(self.records.values(), key=lambda j: -j.id)

    def info(self, jobid: int) -> JobInfo:
        if jobid not in self.records:
            raise FluxError(2, f"unknown job {jobid}")
        return self.records[jobid]

    def cancel(self, jobid: int) -> None:
        self.info(jobid)

    def output(self, jobid: int, offset: int = 0, wait: bool = False) -> tuple[list[str], int, bool]:
        lines = self.outputs[jobid][offset:]
        return lines, offset + len(lines), True

    def eventlog(self, jobid: int) -> list[dict[str, Any]]:
        return [{"timestamp": self.info(jobid).t_submit, "name": "submit", "context": {"userid": 0}}]

    def nodes(self) -> list[str]:
        return ["pod-0", "pod-1"]

    def shutdown(self) -> None:
        pass

    def close(self) -> None:
        pass
