"""Job output: the lines each job's tasks printed, in memory while it runs and for the last OUTPUT_CACHE inactive
jobs (the rest read back from disk), written to its --output/--error files as they arrive, and saved per attempt
when a job is requeued."""

from __future__ import annotations

from typing import Protocol

from ...jobs.output_files import OutputFiles, file_targets
from ...jobs.record import JobRecord
from ...jobs.states import JobState
from .roles import OutputLine, WatchesRole
from .table import JobTable

OUTPUT_CACHE = 256  # inactive jobs whose output stays in memory (the rest is read back from disk)


class RaiseException(Protocol):
    """How output reports a file it cannot open or write: a job exception (Executions.exception)."""

    def __call__(self, record: JobRecord, kind: str, note: str, severity: int = 0) -> None: ...


class JobOutputs:
    """The one owner of jobs' output lines and open output files."""

    def __init__(self, table: JobTable, watches: WatchesRole, raise_exception: RaiseException) -> None:
        self._table = table
        self._watches = watches
        self._raise = raise_exception
        self._lines: dict[int, list[OutputLine]] = {}
        self._files: dict[int, OutputFiles] = {}  # --output/--error files, open while the job runs

    def lines(self, jobid: int) -> list[OutputLine]:
        """A job's output so far (read back from disk once it is out of the cache)."""
        if jobid in self._lines:
            return self._lines[jobid]
        if self._table[jobid].state == JobState.INACTIVE:
            return self._table.load_output(jobid) or []
        return []

    def add(self, jobid: int, lines: list[OutputLine]) -> None:
        self._lines.setdefault(jobid, []).extend(lines)
        record = self._table[jobid]
        files = self.open_files(record)
        if files is not None and not files.failed:
            files.write(lines)
            if files.error is not None:  # said once, and not fatal: the output is kept for `flux job attach`
                self._raise(record, "output", f"{files.error}; the output is kept (flux job attach)", severity=1)
        self._watches.notify_output(jobid)

    def open_files(self, record: JobRecord) -> OutputFiles | None:
        """Open the job's output files when it starts (created empty, then written as lines arrive)."""
        files = self._files.get(record.jobid)
        if files is None and record.state != JobState.INACTIVE:
            targets = file_targets(record.jobspec, record.jobid)
            if targets:
                files = self._files[record.jobid] = OutputFiles(record.jobid, targets)
                if files.error is not None:  # as Flux's shell: a job whose output file cannot be opened fails
                    self._raise(record, "exec", files.error)
        return files

    def save_attempt(self, record: JobRecord) -> None:
        """A requeued job's output so far is kept as this attempt's; the next attempt starts empty."""
        lines = self._lines.pop(record.jobid, [])
        if lines:
            self._table.save_attempt_output(record.jobid, record.requeues, lines)
        self._close_files(record.jobid)

    def save(self, jobid: int) -> None:
        """The job is over: its output goes to disk, its files are closed, the oldest cached outputs go."""
        lines = self._lines.get(jobid, [])
        if lines:
            self._table.save_output(jobid, lines)
        self._close_files(jobid)
        table = self._table
        inactive = [j for j in self._lines if table[j].state == JobState.INACTIVE]
        for old in inactive[: max(0, len(inactive) - OUTPUT_CACHE)]:
            del self._lines[old]

    def _close_files(self, jobid: int) -> None:
        files = self._files.pop(jobid, None)
        if files is not None:
            files.close()
