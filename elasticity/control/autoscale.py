"""The autoscaling loop of one MiniCluster: observe the cluster and its queue, plan, drain, scale (on the
:mod:`elasticity.control.loop` shape: each step returns a :class:`StepResult`).

The plan is :func:`elasticity.policy.autoscale.plan_autoscale` (pure); this loop only carries its memory from
step to step, tells the queue which ranks to drain, scales through the Actuator, and logs every decision and
a ``sample`` per step (size, pending and running jobs) to the JSON-lines event log that the timeline PNG is
drawn from. The clock is passed in, so the same loop runs live and over a virtual clock.

Which ranks the loop holds drained is read back from the queue at every step (the lead keeps them with the
loop's drain reason, :data:`DRAIN_REASON`), never remembered in the process: a loop that was killed mid-drain
and is started again (or replaced) finds the ranks it drained and undrains them, and ranks drained for any
other reason (an operator's) are never touched.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from elasticity.control.events import EventLog
from elasticity.control.loop import StepResult, run, step
from elasticity.control.ports import Actuator, ActuatorError, ClusterView, Observer, ScaleResult
from elasticity.policy.autoscale import AutoscaleMemory, AutoscaleOptions, QueueView, ScalePlan, plan_autoscale

DRAIN_REASON = "autoscaler: draining for a scale-down"
"""The reason an autoscaler drains ranks with (`flux resource drain` lists it): what marks a drain as its own."""


@runtime_checkable
class QueuePort(Protocol):
    """The lead's queue, in ranks: what is pending and running, and which ranks take no new jobs."""

    def queue(self, name: str) -> QueueView: ...

    def drain(self, name: str, ranks: frozenset[int]) -> None:
        """The ranks drained by this controller become exactly these (empty: it undrains all of its own).
        Ranks drained for another reason keep their drain."""
        ...


@dataclass(frozen=True)
class AutoscaleSeen:
    """One observation: the cluster and its queue."""

    view: ClusterView
    queue: QueueView


@dataclass(frozen=True)
class AutoscaleActed:
    """What one step did: the ranks it (un)drained (None: the drain was left as it was), the scale the world
    answered, or why the scale failed."""

    drained: frozenset[int] | None = None
    scaled: ScaleResult | None = None
    error: str = ""


AutoscaleStep = StepResult[AutoscaleSeen, ScalePlan, AutoscaleActed]


@dataclass
class Autoscaler:
    name: str
    observer: Observer
    actuator: Actuator
    queue: QueuePort
    options: AutoscaleOptions = field(default_factory=AutoscaleOptions)
    clock: Callable[[], float] = time.monotonic
    log: EventLog | None = None
    memory: AutoscaleMemory = field(default_factory=AutoscaleMemory)
    draining: frozenset[int] = frozenset()
    """The ranks this loop holds drained, as the queue last reported them."""
    stepped: bool = False
    size: int | None = None
    """The cluster's size when last seen (after this loop's own scale)."""
    last: dict[str, object] | None = None  # open: an event's kind and its fields, each kind its own
    """The last event other than a sample (for status lines)."""

    def step(self) -> AutoscaleStep:
        """One observe -> plan -> act round; a refused or failed scale is logged and retried next step."""
        return step(self, self.clock)

    def observe(self, now: float) -> AutoscaleSeen:
        return AutoscaleSeen(self.observer.observe(self.name), self.queue.queue(self.name))

    def plan(self, seen: AutoscaleSeen, now: float) -> ScalePlan:
        return plan_autoscale(seen.queue, seen.view.size, seen.view.sizes, self.options, self.memory, now)

    def act(self, plan: ScalePlan, seen: AutoscaleSeen, now: float) -> AutoscaleActed:
        view, queue = seen.view, seen.queue
        self.size = view.size
        self._sample(view.size, queue, plan.wanted)
        drained = self._converge(queue, plan)
        scaled = None
        if plan.size is not None and plan.size != view.size:
            self._log("decision", size=plan.size, reason=plan.reason)
            try:
                scaled = self.actuator.scale(self.name, plan.size)
            except ActuatorError as exc:
                self._log("error", error=str(exc))
                return AutoscaleActed(drained, None, str(exc))
            self._log("scaled", previous=scaled.previous, size=scaled.size)
            self.size = scaled.size
            if self.draining:
                self.queue.drain(self.name, frozenset())  # the drained ranks are gone
                self.draining = frozenset()
        self.memory = plan.memory
        return AutoscaleActed(drained, scaled)

    def _converge(self, queue: QueueView, plan: ScalePlan) -> frozenset[int] | None:
        """Make the ranks the lead holds drained for this loop the plan's (less those drained by others);
        returns them when that changed the drain."""
        mine = plan.drain - (queue.draining - queue.owned)
        first = not self.stepped
        if mine != queue.owned:
            self.queue.drain(self.name, mine)
        self.draining, self.stepped = mine, True
        if mine == queue.owned:
            return None
        left = queue.owned - mine
        if first and left:
            self._log("undrain", ranks=sorted(left), reason="drained by an earlier autoscaler of this cluster")
        if mine or not first:
            self._log("drain", ranks=sorted(mine), reason=plan.reason)
        return mine

    def record(self) -> None:
        """Log one sample without acting (the final state, so the timeline ends where the cluster is)."""
        view = self.observer.observe(self.name)
        queue = self.queue.queue(self.name)
        self._sample(view.size, queue, view.size)

    def _sample(self, size: int, queue: QueueView, wanted: int) -> None:
        self._log(
            "sample",
            size=size,
            pending=len(queue.pending),
            pending_nodes=sum(queue.pending),
            running=len(queue.running),
            busy=len(queue.busy),
            wanted=wanted,
        )

    def run(
        self,
        interval: float,
        sleep: Callable[[float], None] = time.sleep,
        stop: Callable[[], bool] = lambda: False,
        max_steps: int | None = None,
    ) -> int:
        """Step every ``interval`` seconds until ``stop()`` or ``max_steps``; returns the steps taken."""
        return len(run(self.step, interval, sleep, stop, max_steps))

    def _log(self, kind: str, **fields: object) -> None:
        if kind != "sample":
            self.last = {"kind": kind, **fields}
        if self.log is not None:
            self.log.write(kind, cluster=self.name, **fields)
