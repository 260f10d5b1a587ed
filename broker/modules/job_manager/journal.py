"""What clients follow: eventlogs and job output (kept in memory while active, saved when the job ends)."""

from __future__ import annotations

from typing import Any

from ...jobs.output_files import OutputFiles, file_targets
from ...jobs.record import JobRecord
from ...jobs.states import JobState
from ...service import Request
from .core import OUTPUT_CACHE, JobManagerCore, Watch


class JournalFeeds(JobManagerCore):
    def _save_output(self, jobid: int) -> None:
        lines = self.output.get(jobid, [])
        if lines:
            self.store.save_output(jobid, lines)
        files = self.output_files.pop(jobid, None)
        if files is not None:
            files.close()
        inactive = [j for j in self.output if self.jobs[j].state == JobState.INACTIVE]
        for old in inactive[: max(0, len(inactive) - OUTPUT_CACHE)]:
            del self.output[old]

    def _output_files(self, record: JobRecord) -> OutputFiles | None:
        """Open the job's output files when it starts (created empty, then written as lines arrive)."""
        files = self.output_files.get(record.jobid)
        if files is None and record.state != JobState.INACTIVE:
            targets = file_targets(record.jobspec, record.jobid)
            if targets:
                files = self.output_files[record.jobid] = OutputFiles(record.jobid, targets)
        return files

    def _lines(self, jobid: int) -> list[list[Any]]:
        if jobid in self.output:
            return self.output[jobid]
        if self.jobs[jobid].state == JobState.INACTIVE:
            return self.store.load_output(jobid) or []
        return []

    def svc_eventlog(self, req: Request) -> None:
        record = self._record(req)
        offset = req.get("offset", int, required=False, default=0)
        self.log_watch.setdefault(record.jobid, []).append(Watch(req, offset))
        self._notify_eventlog(record.jobid)
        return None

    def _notify_eventlog(self, jobid: int) -> None:
        watches = self.log_watch.get(jobid)
        if not watches:
            return
        events = self.eventlogs.get(jobid, [])
        flushed = len(events) - sum(1 for e in self.buffer if e.jobid == jobid)
        eof = self.jobs[jobid].state == JobState.INACTIVE
        keep: list[Watch] = []
        for watch in watches:
            if watch.offset < flushed or eof or not watch.req.payload.get("wait", False):
                chunk = [
                    {"timestamp": e.timestamp, "name": e.name, "context": e.context}
                    for e in events[watch.offset : flushed]
                ]
                watch.req.respond({"events": chunk, "offset": flushed, "eof": eof and flushed == len(events)})
            else:
                keep.append(watch)
        if keep:
            self.log_watch[jobid] = keep
        else:
            del self.log_watch[jobid]
