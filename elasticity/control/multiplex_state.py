"""What the multiplexing planner remembers between ticks, and the small questions it asks of that memory.

Split from `multiplex.py`: the planner's state and helpers live here, what it does with the world's answers in
`multiplex_answers.py`, how it folds an observation in `multiplex_observe.py`, and the per-tick decision in
`multiplex.py` (which assembles `MultiplexPlanner` from these parts). Pure: no process, pod or clock.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from elasticity.control.multiplex_learning import ThroughputLearning
from elasticity.control.multiplex_types import (
    TERMINAL,
    Action,
    MultiplexConfig,
    Phase,
    SimRecord,
    StartSimulation,
    Terminal,
)
from elasticity.model.throughput import Geometry, ThroughputModel
from elasticity.policy.multiplex_requests import PodPlan, SimulationDemand, plan_pods


def sim_number(name: str) -> tuple[int, str]:
    """sim10 after sim9 (names are sim<N>)."""
    digits = name.removeprefix("sim")
    return (int(digits), "") if digits.isdigit() else (1 << 30, name)


@dataclass
class PlannerState:
    """Remembers what the planner decided and what the world answered (the fields of `MultiplexPlanner`)."""

    config: MultiplexConfig
    sims: dict[str, SimRecord] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)  # open: each event kind has its own fields
    planned: PodPlan | None = None
    pod_ceiling_m: dict[int, int] = field(default_factory=dict)
    deferred_until: float | None = None
    backoff: float = 0.0
    blocked: str | None = None
    """Why packing stopped for good (an Infeasible resize); None while packing may continue."""
    last_fairness_at: float = -math.inf
    last_change_at: float = -math.inf
    resizes: int = 0
    restarts: int = 0
    learning: ThroughputLearning = field(default_factory=ThroughputLearning)
    """Rates by N and the fitted throughput model (multiplex_learning.py)."""
    phase: Phase = "profile"
    deferrals: int = 0
    """Deferred answers in a row; after max_deferrals the pods' plans are capped as if Infeasible."""
    pods_down: set[int] = field(default_factory=set)
    refused: set[tuple[int, int]] = field(default_factory=set)
    """(pod, millicores) answered Infeasible: never asked again."""
    _last_requests: dict[int, int] = field(default_factory=dict)
    _asked: dict[int, int] = field(default_factory=dict)
    _noted: str | None = None

    @property
    def rates_by_n(self) -> dict[int, list[float]]:
        """The mean iteration rate seen with N simulations running (read-only here; `learning` keeps it)."""
        return self.learning.rates_by_n

    @property
    def model(self) -> ThroughputModel | None:
        """The fitted throughput model, None before the first fit."""
        return self.learning.model

    def _event(self, now: float, kind: str, **fields: Any) -> None:
        self.events.append({"t": round(now, 3), "event": kind, **fields})

    def active(self) -> list[SimRecord]:
        return [s for s in self.sims.values() if s.state in ("pending", "running")]

    def running_count(self) -> int:
        return sum(1 for s in self.sims.values() if s.state == "running")

    def _estimate(self) -> SimulationDemand | None:
        """The demand of a new simulation: a profiled one's (same command), else None."""
        for rec in self.sims.values():
            if rec.profiled:
                return rec.demand
        return None

    def _next_name(self) -> str:
        return f"sim{len(self.sims) + 1}"

    def desired_plan(self) -> PodPlan:
        return plan_pods(
            [s.demand for s in self.active()],
            self.config.pods,
            floor_m=self.config.floor_m,
            ceiling_m=self.pod_ceiling_m or None,
            overhead_m=self.config.pod_overhead_m,
        )

    def rate(self, rec: SimRecord, since: float) -> float | None:
        """Iterations per second over the samples taken after `since` (None with fewer than two)."""
        pts = [(t, it) for t, it, _ in rec.samples if t >= since]
        if len(pts) < 2 or pts[-1][0] <= pts[0][0]:
            return None
        return (pts[-1][1] - pts[0][1]) / (pts[-1][0] - pts[0][0])

    def _end(self, rec: SimRecord, state: Terminal, now: float, reason: str = "") -> bool:
        """The one place a simulation's end is decided: exactly one of TERMINAL, once (a later verdict, e.g. the
        job's own CANCELED after the controller timed it out, is ignored). Returns False when it had ended."""
        if state not in TERMINAL:
            raise ValueError(f"{state!r} is not how a simulation ends ({', '.join(TERMINAL)})")
        if rec.state in TERMINAL:
            return False
        rec.state, rec.finished_at, rec.reason, rec.failing_since = state, now, reason, None
        makespan = round(now - (rec.started_at or rec.submitted_at), 3)
        self._event(now, state, sim=rec.sim, makespan=makespan, iterations=rec.iterations, reason=reason)
        return True

    def _resubmitted(self, rec: SimRecord, now: float) -> None:
        rec.submitted_at, rec.restarts_at_submit, rec.pod_down = now, self.restarts, False

    def _profiling(self) -> bool:
        """A simulation is pending or not yet profiled: its demand is unknown, so nothing else is decided."""
        return any(s.state == "pending" or (s.state == "running" and not s.profiled) for s in self.sims.values())

    def _may_start_more(self) -> bool:
        return self.blocked is None and len(self.sims) < self.config.total

    def _submit(self, name: str, now: float, demand: SimulationDemand, actions: list[Action]) -> None:
        self.sims[name] = SimRecord(name, now, replace(demand, sim=name), restarts_at_submit=self.restarts)
        self._noted = None
        actions.append(StartSimulation(name, self.config.profile_iterations))
        self._event(now, "start", sim=name, concurrent=len(self.active()))

    def _knee(self, model: ThroughputModel) -> int:
        """The most simulations this model lets run at once (at most max_simulations)."""
        return model.knee(self.config.efficiency_threshold, self.config.max_simulations)

    def current_model(self) -> ThroughputModel | None:
        """The model packing decides by (ThroughputLearning.current): fitted, else the prior, else beta = 0."""
        return self.learning.current(self.config.prior_beta, self._geometry(), self._cpu_demand())

    def _geometry(self) -> Geometry:
        return Geometry(self.config.ranks, self.config.nodes, self.config.cores_per_node)

    def _cpu_demand(self) -> float:
        """u for the model: the mean over profiled simulations (same command) of the cores' share each keeps busy."""
        profiled = [rec.duty for rec in self.sims.values() if rec.duty]
        if not profiled:
            return 0.0
        geometry = self._geometry()
        return sum(geometry.demand(duty) for duty in profiled) / len(profiled)

    def _note_once(self, now: float, kind: str, reason: str) -> None:
        """Why packing waits, once per reason kind until something is packed (a refitted beta that moves the
        predicted efficiency by a point is not news)."""
        if self._noted != kind:
            self._noted = kind
            self._event(now, kind, reason=reason)
