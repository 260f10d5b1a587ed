"""job-exec's entry point: JobExec (job_exec.py) made at start where it must be, else at its first request.

Why (issue 45, an idle broker's memory): job exec's launch code (requests, spawning, CPU binding, job directories,
sub-instances) is about 0.75 MB of an idle broker's resident memory here, on every rank. A broker with no job-exec
setting to check and no previous broker's job directory to sweep serves `job-exec.*` with a stand-in
(first_use.py) that makes it at the first request (a job's start, `flux exec`'s hosts): once, tens of ms. Settings
are checked at start as before, so a bad value still refuses the start; the note on the instance's default CPU
binding, when there is one, comes at that first request.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from .first_use import LoadOnFirstRequest, settings_under
from .task_spawn import seal_descriptors

if TYPE_CHECKING:
    from ..port import ModulePort
    from ..service import Handler

JOB_TMP = "jobtmp"
"""job_tree.JOB_TMP (a test holds them equal): made at a job's start, so a previous broker that ran jobs left it,
and JobExec sweeps that broker's processes at start."""


def needed_at_start(broker: ModulePort) -> bool:
    """Whether JobExec must be made at start: a job-exec setting to check, or a previous broker's jobs to sweep."""
    return settings_under(broker, ("job-exec.",)) or os.path.lexists(os.path.join(broker.rundir, JOB_TMP))


def job_exec(broker: ModulePort) -> None:
    """Module entry point (every rank)."""
    if needed_at_start(broker):
        load(broker)
        return
    if hasattr(os, "posix_spawn"):
        seal_descriptors()  # as JobExec does at start: what the broker inherited stays its own
    LoadOnFirstRequest(broker, "job-exec", lambda: load(broker))


def load(broker: ModulePort) -> Mapping[str, Handler]:
    from .job_exec import JobExec

    return JobExec(broker).handlers
