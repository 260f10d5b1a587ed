"""observe -> plan -> act, with the clock passed in: the one shape every loop (and the simulator) runs.

A plan is a pure function `plan(view, options, now) -> Decision` (the shape of the operator's
`reconcile.plan(observed, options, now)`): it sees one frozen ClusterView and the time, and says what to change.
`Loop.step` observes once, plans, acts through the Actuator, and logs the decision and the world's answers to
the event log. Because the clock and the ports are injected, the same loop runs live (time.monotonic, a real
backend) and in simulation (a virtual clock, `elasticity.sim`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Generic, TypeVar

from elasticity.control.events import EventLog
from elasticity.control.ports import Actuator, ActuatorError, ClusterView, Observer, PodResize, ScaleResult

Options = TypeVar("Options")


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
class StepResult:
    view: ClusterView
    decision: Decision
    scaled: ScaleResult | None = None
    resized: dict[int, PodResize] = field(default_factory=dict)
    error: str = ""
    """Why acting failed (an ActuatorError: Rejected, or the backend's error); the loop carries on next step."""


@dataclass
class Loop(Generic[Options]):
    """One cluster's loop. `clock` gives seconds (monotonic live, virtual in the simulator)."""

    name: str
    observer: Observer
    actuator: Actuator
    plan: Plan[Options]
    options: Options
    clock: Callable[[], float] = time.monotonic
    log: EventLog | None = None

    def step(self) -> StepResult:
        """Observe once, plan, act; never raises for a refused or failed action (it is logged instead)."""
        view = self.observer.observe(self.name)
        now = self.clock()
        decision = self.plan(view, self.options, now)
        if decision.size == view.size:
            decision = replace(decision, size=None)  # already there: nothing to do, nothing to log
        if decision.empty:
            return StepResult(view, decision)
        self._log("decision", size=decision.size, cpu=dict(decision.cpu), reason=decision.reason)
        scaled = None
        resized: dict[int, PodResize] = {}
        try:
            if decision.size is not None:
                scaled = self.actuator.scale(self.name, decision.size)
                self._log("scaled", previous=scaled.previous, size=scaled.size)
            if decision.cpu:
                resized = self.actuator.resize_many(self.name, decision.cpu)
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
            return StepResult(view, decision, scaled, resized, str(exc))
        return StepResult(view, decision, scaled, resized)

    def run(
        self,
        interval: float,
        sleep: Callable[[float], None] = time.sleep,
        stop: Callable[[], bool] = lambda: False,
        max_steps: int | None = None,
    ) -> list[StepResult]:
        """Step every `interval` seconds until `stop()` or `max_steps`; returns the steps that changed something."""
        changed: list[StepResult] = []
        steps = 0
        while not stop() and (max_steps is None or steps < max_steps):
            result = self.step()
            if not result.decision.empty:
                changed.append(result)
            steps += 1
            sleep(interval)
        return changed

    def _log(self, kind: str, **fields: object) -> None:
        if self.log is not None:
            self.log.write(kind, cluster=self.name, **fields)
