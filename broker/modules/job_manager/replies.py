"""The shapes of the job manager's own RPC payloads (its replies, and the job-exec requests it sends): TypedDicts,
so their keys are checked where they are made. A job's job-list view is broker/jobs' (jobs/info.job_info)."""

from __future__ import annotations

from typing import TypedDict

from .roles import OutputLine


class SubmitAck(TypedDict):
    id: int


class UrgencyReply(TypedDict):
    old_urgency: int


class QueueStatus(TypedDict):
    """job-manager.queue's answer (`flux queue status` and the actions)."""

    enabled: bool
    enable_reason: str
    started: bool
    stop_reason: str
    policy: str
    pending: int
    running: int


class ViewCounts(TypedDict):
    kept: dict[str, int]
    to_render: int


class StatsReply(TypedDict):
    states: dict[str, int]
    queue_length: int
    running: int
    views: ViewCounts


class HistoryReply(TypedDict):
    jobs: list[int]


class OutputChunk(TypedDict, total=False):
    """job-manager.output's answer: the lines from the watch's offset; `info` once the job is over."""

    lines: list[OutputLine]
    offset: int
    eof: bool
    info: dict[str, object]


class KillRequest(TypedDict):
    """job-exec.kill as the job manager sends it: the job's tasks on a rank, their generation, how."""

    id: int
    gen: int
    signal: int
    grace: float
