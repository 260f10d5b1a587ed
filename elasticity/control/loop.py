"""observe -> plan -> act, with the clock passed in: the one shape every loop (and the simulator) runs.

A loop is a :class:`Controller`: ``observe(now)`` reads the world once through the ports, ``plan(seen, now)``
says what to change (a pure function of what was seen, the time and the controller's own memory, the shape of
the operator's ``reconcile.plan(observed, options, now)``), and ``act(plan, seen, now)`` carries it out through
the ports and says what the world answered. :func:`step` runs one round and hands back a frozen
:class:`StepResult` (what a caller such as the operator reads, instead of watching the ports); :func:`run`
steps on an interval. Because the clock and the ports are injected, the same loop runs live
(``time.monotonic``, a real backend) and in simulation (a virtual clock, ``elasticity.sim``).

The loops on this shape: the autoscaler (``autoscale.py``), the pool (``pool.py``), the multiplexing runner
(``multiplex_runner.py``) and :class:`Loop` below (a plan that sets a size and pod CPU requests).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Generic, Protocol, TypeVar

from elasticity.control.events import EventLog
from elasticity.control.ports import Actuator, ActuatorError, ClusterView, Observer, PodResize, ScaleResult

Options = TypeVar("Options")
Seen = TypeVar("Seen")
Planned = TypeVar("Planned")
Acted = TypeVar("Acted")
Result = TypeVar("Result")
ActedT = TypeVar("ActedT", covariant=True)


@dataclass(frozen=True)
class StepResult(Generic[Seen, Planned, Acted]):
    """One round of a loop: when, what it saw, what its plan said, and what acting did."""

    now: float
    seen: Seen
    plan: Planned
    acted: Acted


class Controller(Protocol[Seen, Planned, ActedT]):
    """What a loop is made of; :func:`step` calls the three in order, once each."""

    def observe(self, now: float) -> Seen: ...

    def plan(self, seen: Seen, now: float) -> Planned: ...

    def act(self, plan: Planned, seen: Seen, now: float) -> ActedT: ...


def step(controller: Controller[Seen, Planned, Acted], clock: Callable[[], float]) -> StepResult[Seen, Planned, Acted]:
    """One observe -> plan -> act round at ``clock()``."""
    now = clock()
    seen = controller.observe(now)
    planned = controller.plan(seen, now)
    return StepResult(now, seen, planned, controller.act(planned, seen, now))


def run(
    one_step: Callable[[], Result],
    interval: float,
    sleep: Callable[[float], None] = time.sleep,
    stop: Callable[[], bool] = lambda: False,
    max_steps: int | None = None,
    until: Callable[[Result], bool] = lambda _: False,
) -> list[Result]:
    """Step, then sleep ``interval``, until ``stop()`` (asked before each step), ``max_steps`` steps, or a step
    for which ``until(result)`` holds (then without sleeping). Returns every step's result."""
    results: list[Result] = []
    while not stop() and (max_steps is None or len(results) < max_steps):
        result = one_step()
        results.append(result)
        if until(result):
            break
        sleep(interval)
    return results


@dataclass(frozen=True)
class Decision:
    """What a plan wants changed; empty means leave the cluster alone."""

    size: int | None = None
    """Scale to this size (None: keep)."""
    cpu: Mapping[int, int] = field(default_factory=dict)
    """Pod index -> new CPU request in millicores."""
    reason: str = ""
    """Why, in words a user reads in the event log."""

    @property
    def empty(self) -> bool:
        return self.size is None and not self.cpu


Plan = Callable[[ClusterView, Options, float], Decision]


@dataclass(frozen=True)
class Applied:
    """What the world answered to a :class:`Decision`."""

    scaled: ScaleResult | None = None
    resized: dict[int, PodResize] = field(default_factory=dict)
    error: str = ""
    """Why acting failed (an ActuatorError: Rejected, or the backend's error); the loop carries on next step."""


@dataclass
class Loop(Generic[Options]):
    """One cluster's size-and-CPU loop over a plan function. `clock` gives seconds (monotonic live, virtual in
    the simulator)."""

    name: str
    observer: Observer
    actuator: Actuator
    planner: Plan[Options]
    options: Options
    clock: Callable[[], float] = time.monotonic
    log: EventLog | None = None

    def observe(self, now: float) -> ClusterView:
        return self.observer.observe(self.name)

    def plan(self, seen: ClusterView, now: float) -> Decision:
        decision = self.planner(seen, self.options, now)
        if decision.size == seen.size:
            decision = replace(decision, size=None)  # already there: nothing to do, nothing to log
        return decision

    def act(self, plan: Decision, seen: ClusterView, now: float) -> Applied:
        """Never raises for a refused or failed action (it is logged instead)."""
        if plan.empty:
            return Applied()
        self._log("decision", size=plan.size, cpu=dict(plan.cpu), reason=plan.reason)
        scaled = None
        resized: dict[int, PodResize] = {}
        try:
            if plan.size is not None:
                scaled = self.actuator.scale(self.name, plan.size)
                self._log("scaled", previous=scaled.previous, size=scaled.size)
            if plan.cpu:
                resized = self.actuator.resize_many(self.name, plan.cpu)
                for index, answer in sorted(resized.items()):
                    self._log(
                        "resize",
                        index=index,
                        outcome=answer.outcome.value,
                        reason=answer.reason,
                        cpu_requested=answer.cpu_requested,
                        cpu_actual=answer.cpu_actual,
                    )
        except ActuatorError as exc:
            self._log("error", error=str(exc))
            return Applied(scaled, resized, str(exc))
        return Applied(scaled, resized)

    def step(self) -> StepResult[ClusterView, Decision, Applied]:
        return step(self, self.clock)

    def run(
        self,
        interval: float,
        sleep: Callable[[float], None] = time.sleep,
        stop: Callable[[], bool] = lambda: False,
        max_steps: int | None = None,
    ) -> list[StepResult[ClusterView, Decision, Applied]]:
        """Step every `interval` seconds until `stop()` or `max_steps`; returns the steps that changed something."""
        results = run(self.step, interval, sleep, stop, max_steps)
        return [r for r in results if not r.plan.empty]

    def _log(self, kind: str, **fields: object) -> None:
        if self.log is not None:
            self.log.write(kind, cluster=self.name, **fields)
