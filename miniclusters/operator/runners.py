"""What the operator's supervisors of per-cluster runners share (campaign.py, multiplexing.py): the runners by
cluster, a start failure reported once per reason, the Started report, and a step's decisions reported (each
Event as it comes, the condition when it changes or carries an Event of its own).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

from miniclusters.operator.loop_types import ClusterKey, Decision

DEFAULT_INTERVAL = 2.0
START_RETRY = 30.0
"""Seconds before a runner that could not start is tried again (its spec changing retries at once)."""


class SteppedLoop(Protocol):
    """One cluster's runner as its supervisor sees it."""

    due: float
    last: Decision | None

    @property
    def finished(self) -> bool: ...


LoopT = TypeVar("LoopT", bound=SteppedLoop)
StarterT = TypeVar("StarterT")


class RunnerSupervisor(Generic[LoopT, StarterT]):
    """Starts, steps and stops the runners; every decision goes to ``report(key, decision, set_condition)``
    (which never raises)."""

    def __init__(
        self,
        start: StarterT,
        clock: Callable[[], float],
        report: Callable[[ClusterKey, Decision, bool], None],
        interval: float = DEFAULT_INTERVAL,
    ) -> None:
        self.start = start
        self.clock = clock
        self.report = report
        self.interval = interval
        self.loops: dict[ClusterKey, LoopT] = {}
        self.failed: dict[ClusterKey, str] = {}
        """The last reason a cluster's runner could not start (said once)."""
        self.retry_at: dict[ClusterKey, float] = {}
        """When a runner that could not start may be tried again (not at every reconcile: starting may be costly,
        such as a campaign's cases prepared in the lead pod)."""

    def _start_failed(self, key: ClusterKey, message: str) -> None:
        """Reported once per reason, not at every reconcile of the cluster; tried again after START_RETRY."""
        self.retry_at[key] = self.clock() + START_RETRY
        if self.failed.get(key) != message:
            self.failed[key] = message
            self.report(key, Decision(False, "LoopFailed", message, "Warning"), True)

    def _may_start(self, key: ClusterKey) -> bool:
        return self.clock() >= self.retry_at.get(key, float("-inf"))

    def _started(self, key: ClusterKey, loop: LoopT, message: str) -> None:
        self.failed.pop(key, None)
        self.retry_at.pop(key, None)
        self.loops[key] = loop
        self.report(key, Decision(True, "Started", message, "Normal"), True)

    def _report_step(self, key: ClusterKey, loop: LoopT, changes: list[Decision], condition: Decision) -> None:
        for decision in changes:
            self.report(key, decision, False)
        if loop.last is None or loop.last.condition != condition.condition or condition.event_type is not None:
            self.report(key, condition, True)
        loop.last = condition

    def next_due(self) -> float | None:
        return min((loop.due for loop in self.loops.values() if not loop.finished), default=None)
