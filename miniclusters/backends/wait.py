"""Waiting until every pod runs and every broker has joined the lead, reporting progress as it goes.

Pure apart from the injected status function, clock and sleep, so tests drive it without waiting.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from miniclusters.backends.base import BackendError, BackendTimeoutError, ClusterStatus, StartRefusedError
from miniclusters.words import of, plural

# When exec into pods is not allowed we cannot ask the lead; pods being ready is the best we can know.
LEAD_UNASKABLE = ("forbidden",)
NEVER_STARTS = frozenset({"ErrImageNeverPull", "InvalidImageName", "CreateContainerConfigError"})
"""Waiting reasons the kubelet does not retry its way out of: the image is not on the node and may not be
pulled, its name is invalid, or the container's configuration names what does not exist."""


@dataclass(frozen=True)
class WaitProgress:
    size: int
    running: int
    ready: int
    joined: int | None
    elapsed: float
    message: str


ProgressCallback = Callable[[WaitProgress], None]


def joined_count(status: ClusterStatus) -> int | None:
    if status.ranks_up is None:
        return None
    return sum(1 for rank in status.ranks_up if rank < status.size)


def is_up(status: ClusterStatus) -> tuple[bool, str]:
    """(done, what we are waiting for) for one status snapshot; BackendError when it can never come up."""
    refused = next((p for p in status.pods if p.refused is not None), None)
    if refused is not None:
        raise StartRefusedError(
            f"MiniCluster {status.name!r}: pod {refused.name} (index {refused.index}) refused to start: "
            f"{refused.refused}"
        )
    failed = [p for p in status.pods if p.phase == "Failed"]
    if status.finished:
        return True, "the lead finished" if status.succeeded else "the Job failed"
    if failed and not status.finished:
        names = ", ".join(f"{p.name} (exit {p.exit_code})" for p in failed)
        raise BackendError(f"MiniCluster {status.name!r}: pods failed: {names}; see `minicluster logs {status.name}`")
    stuck = [p for p in status.pods if p.reason and p.reason.removeprefix("Init:") in NEVER_STARTS]
    if stuck:
        names = ", ".join(f"{p.name} ({p.reason})" for p in stuck)
        raise BackendError(f"MiniCluster {status.name!r}: pods cannot start: {names}; see `minicluster status`")
    if status.running_pods < status.size:
        waiting = [f"{p.name}: {p.reason}" for p in status.pods if p.reason and p.phase != "Running"]
        why = f" ({', '.join(waiting)})" if waiting else ""
        return False, f"{of(status.running_pods, status.size, 'pod')} running{why}"
    joined = joined_count(status)
    if joined is None:
        if status.lead_error and any(word in status.lead_error.lower() for word in LEAD_UNASKABLE):
            return status.ready_pods >= status.size, "cannot ask the lead (exec forbidden): pods ready"
        return False, f"waiting for the lead broker: {status.lead_error or 'no answer yet'}"
    if joined < status.size:
        return False, f"{of(joined, status.size, 'broker')} joined"
    return True, f"{plural(status.size, 'pod')} running, {plural(joined, 'broker')} joined"


def wait_until_ready(
    read_status: Callable[[], ClusterStatus],
    timeout: float,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
    interval: float = 2.0,
    progress: ProgressCallback | None = None,
) -> ClusterStatus:
    start = clock()
    while True:
        status = read_status()
        done, message = is_up(status)
        elapsed = clock() - start
        if progress is not None:
            progress(
                WaitProgress(
                    status.size, status.running_pods, status.ready_pods, joined_count(status), elapsed, message
                )
            )
        if done:
            return status
        if elapsed >= timeout:
            raise BackendTimeoutError(
                f"MiniCluster {status.name!r} not up after {timeout:.0f}s: {message}; "
                f"look at `minicluster status {status.name}` and `minicluster logs {status.name} 0`"
            )
        sleep(interval)
