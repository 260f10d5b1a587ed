"""The shapes of the job manager's own RPC payloads (its replies, and the job-exec requests it sends): TypedDicts,
so their keys are checked where they are made. A job's job-list view, and the answers the job layer's client
reads too (stats, queue), are broker/jobs/shapes.py's (one definition for both sides)."""

from __future__ import annotations

from typing import TypedDict

from ...jobs.shapes import JobInfoRecord
from .roles import OutputLine


class SubmitAck(TypedDict):
    id: int


class UrgencyReply(TypedDict):
    old_urgency: int


class HistoryReply(TypedDict):
    jobs: list[int]


class WaitResult(TypedDict):
    """One job's end in job-manager.wait-all's answer: what an exit code is made of (jobcli_common.exit_code)."""

    id: int
    returncode: int | None
    success: bool


class WaitAllReply(TypedDict):
    """job-manager.wait-all's answer, once every job it names is inactive: their ends, in the order asked."""

    jobs: list[WaitResult]


class OutputChunk(TypedDict, total=False):
    """job-manager.output's answer: the lines from the watch's offset; `info` once the job is over."""

    lines: list[OutputLine]
    offset: int
    eof: bool
    info: JobInfoRecord


class KillRequest(TypedDict):
    """job-exec.kill as the job manager sends it: the job's tasks on a rank, their generation, how."""

    id: int
    gen: int
    signal: int
    grace: float
