"""What clients follow: eventlogs and job output (kept in memory while active, saved when the job ends)."""

from __future__ import annotations

from typing import Any

from ...jobs.jobid import encode_f58
from ...jobs.record import JobRecord
from ...jobs.states import JobState
from ...service import Request
from .core import OUTPUT_CACHE, JobManagerCore, Watch


class JournalFeeds(JobManagerCore):
    def _save_output(self, jobid: int) -> None:
        lines = self.output.get(jobid, [])
        if lines:
            self.store.save_output(jobid, lines)
            self._copy_to_files(self.jobs[jobid], lines)
        inactive = [j for j in self.output if self.jobs[j].state == JobState.INACTIVE]
        for old in inactive[: max(0, len(inactive) - OUTPUT_CACHE)]:
            del self.output[old]

    def _copy_to_files(self, record: JobRecord, lines: list[list[Any]]) -> None:
        """--output/--error files, written by the lead when the job ends ({{id}} expands as in Flux)."""
        files = record.jobspec.get("attributes", {}).get("system", {}).get("shell", {}).get("options", {})
        output = files.get("output", {}) if isinstance(files, dict) else {}
        targets: dict[str, str] = {}
        for stream in ("stdout", "stderr"):
            path = output.get(stream, {}).get("path") if isinstance(output.get(stream), dict) else None
            if path:
                targets[stream] = path.replace("{{id}}", encode_f58(record.jobid)).replace(
                    "{{jobid}}", encode_f58(record.jobid)
                )
        if "stdout" in targets and "stderr" not in targets:
            targets["stderr"] = targets["stdout"]
        handles: dict[str, Any] = {}
        try:
            for path in targets.values():
                if path not in handles:
                    handles[path] = open(path, "w", encoding="utf-8")  # noqa: SIM115
            for stream, _task, text in lines:
                if stream in targets:
                    handles[targets[stream]].write(text)
        except OSError as exc:
            print(f"flux-job-manager: {encode_f58(record.jobid)}: cannot write output: {exc}", flush=True)
        finally:
            for handle in handles.values():
                handle.close()

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
