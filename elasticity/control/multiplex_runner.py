"""The multiplexing loop: observe (cluster view + simulations) -> MultiplexPlanner.decide -> act, clock injected,
on the :mod:`elasticity.control.loop` shape (each step returns a :class:`StepResult` whose ``acted`` carries
the progress line and the planner events the step added, which is what the operator reads).

Every decision and every answer from the world goes to the event log (JSON lines) so the CLI can show status,
a summary table and the timeline figure; the loop never raises for a refused action, it logs it and the
planner adapts (back-off on Deferred, a smaller plan on Infeasible, a cancelled simulation's CPU returned).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from elasticity.control.events import EventLog
from elasticity.control.loop import StepResult, run, step
from elasticity.control.multiplex import MultiplexPlanner
from elasticity.control.multiplex_ports import JobShares, Simulations
from elasticity.control.multiplex_types import (
    Action,
    CancelSimulation,
    Observation,
    ResizePods,
    SetJobShares,
    StartSimulation,
    Terminal,
)
from elasticity.control.ports import Actuator, ActuatorError, ClusterView, Observer, Rejected


@dataclass(frozen=True)
class Progress:
    """One line of progress for the user."""

    t: float
    phase: str
    running: int
    finished: int
    requested_m: int
    beta: float | None
    rates: dict[str, float]


@dataclass(frozen=True)
class MultiplexActed:
    """What one step did: the progress after it, and the planner events it added (decisions and answers)."""

    progress: Progress
    events: tuple[dict[str, object], ...] = ()  # open: planner events, each kind with its own fields


MultiplexStep = StepResult[Observation, list[Action], MultiplexActed]


@dataclass
class MultiplexRunner:
    name: str
    planner: MultiplexPlanner
    observer: Observer
    actuator: Actuator
    simulations: Simulations
    shares: JobShares | None = None
    clock: Callable[[], float] = time.monotonic
    log: EventLog | None = None
    on_progress: Callable[[Progress], None] | None = None
    job_ids: dict[str, str] = field(default_factory=dict)
    _logged: int = 0
    _t0: float | None = None
    last_view: ClusterView | None = None

    def _now(self) -> float:
        now = self.clock()
        if self._t0 is None:
            self._t0 = now
        return now - self._t0

    def observation(self, now: float) -> Observation:
        view = self.observer.observe(self.name)
        self.last_view = view
        pods = set(self.planner.config.pods)
        # what each pod runs with now: a Deferred or in-progress resize has changed the spec, not the pod
        requests = {
            p.index: int(p.cpu_actual if p.cpu_actual is not None else (p.cpu_request or 0))
            for p in view.pods
            if p.index in pods
        }
        on_nodes = {p.node for p in view.pods if p.index in pods}
        nodes = [n for n in view.nodes if n.name in on_nodes] or list(view.nodes)
        if nodes:
            allocatable = sum(n.allocatable_millicores for n in nodes)
        else:
            allocatable = int(self.planner.config.cores_per_node * self.planner.config.nodes * 1000)
        restarts = sum(p.restarts for p in view.pods if p.index in pods)
        down = tuple(sorted(p.index for p in view.pods if p.index in pods and p.phase != "Running"))
        down += tuple(sorted(pods - {p.index for p in view.pods}))
        return Observation(now, self.simulations.observe(), requests, allocatable, restarts, down)

    def observe(self, now: float) -> Observation:
        return self.observation(now)

    def plan(self, seen: Observation, now: float) -> list[Action]:
        return self.planner.decide(seen)

    def act(self, plan: list[Action], seen: Observation, now: float) -> MultiplexActed:
        for action in plan:
            self._act(action, now)
        events = self._flush()
        progress = self.progress(now, seen)
        if self.on_progress is not None:
            self.on_progress(progress)
        return MultiplexActed(progress, events)

    def step(self) -> MultiplexStep:
        """One observe -> decide -> act round (time counted from the first step)."""
        return step(self, self._now)

    def _act(self, action: Action, now: float) -> None:
        planner = self.planner
        if isinstance(action, StartSimulation):
            answer = self.simulations.submit(action.sim, action.profile_iterations)
            if answer.ok:
                self.job_ids[action.sim] = answer.job_id
            planner.simulation_started(action.sim, now, answer.ok, answer.reason, answer.job_id)
        elif isinstance(action, CancelSimulation):
            self.simulations.cancel(action.sim, action.reason)
        elif isinstance(action, ResizePods):
            try:
                answers = self.actuator.resize_many(self.name, action.requests_m)
            except Rejected as exc:  # the request itself is wrong (no such pod, pod not running): never retried
                planner.resize_answered(now, {p: ("infeasible", str(exc)) for p in action.requests_m})
                return
            except ActuatorError as exc:
                planner.resize_answered(now, {p: ("deferred", str(exc)) for p in action.requests_m})
                return
            planner.resize_answered(now, {p: (a.outcome.value, a.reason) for p, a in answers.items()})
        elif isinstance(action, SetJobShares) and self.shares is not None:
            planner.shares_answered(now, self.shares.level, self.shares.set_shares(action.shares_m))

    def _flush(self) -> tuple[dict[str, object], ...]:  # open: as MultiplexActed.events
        """Write the planner's new events to the JSON-lines log; returns them."""
        new = tuple(self.planner.events[self._logged :])
        if self.log is not None:
            for event in new:
                fields = {k: v for k, v in event.items() if k != "event"}
                self.log.write(str(event["event"]), cluster=self.name, **fields)
        self._logged += len(new)
        return new

    def progress(self, now: float, obs: Observation) -> Progress:
        since = self.planner.last_change_at + self.planner.config.settle_time
        rates = {
            rec.sim: r
            for rec in self.planner.sims.values()
            if rec.state == "running"
            for r in [self.planner.rate(rec, since)]
            if r is not None
        }
        model = self.planner.model
        return Progress(
            t=now,
            phase=self.planner.phase,
            running=sum(1 for s in self.planner.sims.values() if s.state == "running"),
            finished=sum(1 for s in self.planner.sims.values() if s.state == "done"),
            requested_m=sum(obs.pod_requests_m.values()),
            beta=model.beta if model is not None else None,
            rates=rates,
        )

    def stop(self, state: Terminal, reason: str) -> None:
        """End every simulation still pending or running as `state` (cancelled, timeout), cancel their jobs and
        write the events, so the log and the timeline close where the controller stopped."""
        now = self._now()
        for cancel in self.planner.stop(now, state, reason):
            try:
                self.simulations.cancel(cancel.sim, cancel.reason)
            except Exception as exc:  # the end is recorded already; say that the job may still run
                self.planner.cancel_failed(now, cancel.sim, str(exc) or type(exc).__name__)
        self._flush()

    def run(
        self,
        interval: float = 1.0,
        sleep: Callable[[float], None] = time.sleep,
        timeout: float | None = None,
        stopping: Callable[[], str | None] = lambda: None,
    ) -> list[Progress]:
        """Step until every simulation is done and no more will start, `timeout` seconds pass (what runs ends
        as timeout), or `stopping()` gives a reason (what runs is cancelled with it)."""
        asked: list[str] = []

        def stop() -> bool:
            why = stopping()
            if why:
                asked.append(why)
            return bool(why)

        def until(result: MultiplexStep) -> bool:
            progress = result.acted.progress
            return progress.phase == "done" or (timeout is not None and progress.t > timeout)

        history = [r.acted.progress for r in run(self.step, interval, sleep, stop, until=until)]
        if asked:
            self.stop("cancelled", asked[0])
        elif history and history[-1].phase != "done":
            self.stop("timeout", f"controller timeout after {timeout:g}s")
        return history
