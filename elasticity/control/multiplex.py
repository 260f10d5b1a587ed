"""The multiplexing controller's decisions: profile -> proportional resize -> pack more -> fairness (pure).

`MultiplexPlanner.decide(observation)` reads one snapshot of the world (simulations, pod requests, the nodes'
allocatable CPU, pod restarts; the clock is in the observation) and returns the actions to take; the answers
to resizes come back through `resize_answered`. Nothing here touches a process, a pod or a clock: the runner
(`elasticity/control/multiplex_runner.py`) does observe -> decide -> act through ports, and the same planner
runs against the local backend, the Kubernetes backend and the fake API server in tests.

Phases (REFERENCE.md section 6, plus what the paper left out):
1. profile: a simulation starts with its equal (rigid) per-rank CPU, or for later ones the estimate from the
   first profile, and runs K iterations with the PMPI profiler; with `profile_together` = k > 1 the first k
   start at once, splitting the rigid allocation in equal shares, and are profiled side by side (the second
   does not wait K iterations for the first's profile; no N=1 rate is then seen, so beta has no reference and
   the knee uses `prior_beta`, else the processor-sharing stretch alone, beta = 0);
2. resize: every pod's request becomes the sum of the needs of its ranks from all simulations on it; inside a
   shared pod each simulation gets a share (a child cgroup weight) following its need;
3. pack: while the sum of requests plus one more simulation's estimate fits the allocatable CPU and the fitted
   throughput model predicts an efficiency at or above the threshold, start the next one; beta is refitted from
   the iteration rates observed at each N (makespans scale as 1 / rate for a fixed number of iterations);
4. fairness: when fastest/slowest progress exceeds the threshold, move CPU toward the slow one in steps of at
   most 25% of its request, one step per interval.
Failures: a Deferred resize is retried with exponential back-off and packing waits; an Infeasible one caps
that pod's plan at what it has and packing stops; a simulation whose pods never start is cancelled after
`start_timeout` and its CPU returned; a finished one releases its CPU; pod restarts are counted; a simulation
that failed because a pod was lost (a follower killed) is resubmitted, at most `max_retries` times.

Every simulation ends in exactly one of done, failed (with its reason), cancelled or timeout, decided in one
place (`_end`) and logged once as an event of that name; `stop` ends the ones still running when the controller
stops (timed out, interrupted, `minicluster down`) and says so in a last `controller-stop` event.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import NotRequired, TypedDict

from elasticity.control.multiplex_answers import PlannerAnswers
from elasticity.control.multiplex_observe import PlannerObservation
from elasticity.control.multiplex_types import (
    Action,
    Observation,
    ResizePods,
    SetJobShares,
    StartSimulation,
)
from elasticity.policy.fairness import fairness_step, progress_ratio
from elasticity.policy.multiplex_requests import PodPlan, SimulationDemand, apply_fairness, equal_demand

__all__ = ["MultiplexPlanner", "SummaryRow", "all_done", "summary_rows"]


@dataclass
class MultiplexPlanner(PlannerAnswers, PlannerObservation):
    """Remembers what it decided and what the world answered; decide() is the only entry point per tick.

    Its state and helpers are `PlannerState` (multiplex_state.py); answers and observations are folded in by
    `PlannerAnswers` and `PlannerObservation`."""

    def decide(self, obs: Observation) -> list[Action]:
        """One tick: fold the observation in, then resize, profile, pack or take a fairness step (in that order)."""
        now = obs.now
        actions: list[Action] = []
        self._note_pods(obs)
        changed = self._absorb(obs, actions)

        # the plan: every pod's request = sum of its simulations' needs
        plan = self.desired_plan()
        if self.deferred_until is not None and now < self.deferred_until:
            self.phase = "resize"
            return actions
        wanted = self._wanted(plan, obs)
        if wanted or (changed and plan != self.planned):
            self._resize(obs, plan, wanted, self._why(changed), actions)
            return actions
        self.planned = plan

        if self._profiling():
            self.phase = "profile"
            return actions

        # pack one more while headroom and the model allow it
        start = self._maybe_pack(obs, plan)
        if start is not None:
            actions.append(start)
            self.phase = "pack"
            return actions

        # fairness: one bounded step per interval, once rates have settled
        if self._maybe_fairness(now):
            plan = self.desired_plan()
            wanted = self._wanted(plan, obs)
            if wanted:
                self._asked = dict(wanted)
                actions.append(ResizePods(wanted, "fairness"))
                self._event(now, "resize", requests=wanted, total_m=plan.total_m, reason="fairness")
            if plan.job_shares_m != (self.planned.job_shares_m if self.planned else None):
                actions.append(SetJobShares(plan.job_shares_m))
            self.planned = plan
            self.last_change_at = now
            self.phase = "fairness"
            return actions
        self.phase = "done" if not self.active() and not self._may_start_more() else "watch"
        return actions

    def _note_pods(self, obs: Observation) -> None:
        """Pod restarts and pods down: counted, marked on the simulations running, and packing stops."""
        now = obs.now
        self._last_requests = dict(obs.pod_requests_m)
        if obs.restarts > self.restarts:
            self._event(now, "pod-restart", total=obs.restarts)
        self.restarts = max(self.restarts, obs.restarts)
        if obs.pods_down:
            for rec in self.active():
                rec.pod_down = True
        for pod in obs.pods_down:
            if pod not in self.pods_down:
                self.pods_down.add(pod)
                self.blocked = f"pod {pod} is not running; no more simulations packed"
                self._event(now, "pod-down", pod=pod)

    def _resize(self, obs: Observation, plan: PodPlan, wanted: dict[int, int], why: str, actions: list[Action]) -> None:
        """Ask for the plan's requests (and per-job shares); after a pure shrink, maybe pack in the same tick."""
        now = obs.now
        if wanted:
            self._asked = dict(wanted)
            actions.append(ResizePods(wanted, why))
            self._event(now, "resize", requests=wanted, total_m=plan.total_m, reason=why)
        if plan.job_shares_m and (self.planned is None or plan.job_shares_m != self.planned.job_shares_m):
            actions.append(SetJobShares(plan.job_shares_m))
        self.planned = plan
        self.last_change_at = now
        self.phase = "resize"
        shrinks = all(m <= obs.pod_requests_m.get(p, m) for p, m in wanted.items())
        if shrinks and not self._profiling():
            # a shrink (a profile's proportional resize) cannot be refused for want of room, so the next
            # simulation may start in the same tick instead of one interval later
            start = self._maybe_pack(obs, plan)
            if start is not None:
                actions.append(start)
                self.phase = "pack"

    def _wanted(self, plan: PodPlan, obs: Observation) -> dict[int, int]:
        """Pods whose request must change, minus requests already refused as Infeasible."""
        return {
            p: m for p, m in plan.requests_m.items() if obs.pod_requests_m.get(p) != m and (p, m) not in self.refused
        }

    def _why(self, changed: set[str]) -> str:
        return ", ".join(sorted(changed)) or "plan"

    def _maybe_pack(self, obs: Observation, plan: PodPlan) -> StartSimulation | None:
        cfg = self.config
        now = obs.now
        if not self._may_start_more() or len(self.active()) >= cfg.max_simulations:
            return None
        if self.backoff > 0:
            return None  # a resize is still deferred: settle it before deploying more
        running = len(self.active())
        if running and now - self.last_change_at < cfg.settle_time * 2 and running not in self.rates_by_n:
            return None  # one settle time to let rates settle at this N, one to measure them (beta's refit)
        estimate = self._estimate()
        if estimate is None:
            if running:
                return None  # the running one's profile will say what the next one needs
            # every earlier simulation ended before its profile was read: start the next one as the first was
            # (its equal, rigid CPU; no headroom test) so that it is profiled, instead of waiting for ever
            self._event(now, "unprofiled", reason="no simulation was profiled before it ended: the next starts rigid")
            return self._start(now, equal_demand("", cfg.block_placement(), cfg.equal_per_rank_m))
        n_next = len(self.active()) + 1
        need = plan.total_m + math.ceil(estimate.total_m)
        if need > obs.allocatable_m:
            self._note_once(now, "no-headroom", f"{need}m for {n_next} simulations > {obs.allocatable_m}m allocatable")
            return None
        model = self.current_model()
        if model is not None and model.efficiency(n_next) < cfg.efficiency_threshold:
            basis = f"beta={model.beta:.3f}" if model is self.model or cfg.prior_beta is not None else "beta unknown"
            self._note_once(
                now,
                "knee",
                f"model predicts efficiency {model.efficiency(n_next):.0%} for N={n_next} "
                f"(< {cfg.efficiency_threshold:.0%}, {basis}, u={model.demand:.2f})",
            )
            return None
        return self._start(now, estimate)

    def _start(self, now: float, demand: SimulationDemand) -> StartSimulation:
        name = self._next_name()
        actions: list[Action] = []
        self._submit(name, now, replace(demand, sim=name, scale=1.0), actions)
        self.last_change_at = now
        start = actions[0]
        assert isinstance(start, StartSimulation)
        return start

    def _maybe_fairness(self, now: float) -> bool:
        """Apply one fairness step to the demands when one is due; True when the plan changed."""
        cfg = self.config
        if now - self.last_fairness_at < cfg.fairness_interval or now - self.last_change_at < cfg.settle_time * 2:
            return False
        running = [s for s in self.sims.values() if s.state == "running" and s.profiled]
        if len(running) < 2:
            return False
        since = self.last_change_at + cfg.settle_time
        rates = {s.sim: r for s in running for r in [self.rate(s, since)] if r is not None}
        if len(rates) < 2:
            return False
        requests = {s.sim: math.ceil(s.demand.total_m) for s in running}
        step = fairness_step(rates, requests, threshold=cfg.fairness, floor_m=cfg.floor_m)
        if step is None:
            return False
        demands = apply_fairness([s.demand for s in running], step)
        for d in demands:
            self.sims[d.sim].demand = d
        self.last_fairness_at = now
        self._event(
            now,
            "fairness",
            receiver=step.receiver,
            donor=step.donor,
            moved_m=step.millicores,
            ratio=round(step.ratio, 3),
            rates={k: round(v, 3) for k, v in rates.items()},
        )
        return True

    def fairness_ratio(self, now: float) -> float:
        since = self.last_change_at + self.config.settle_time
        rates = {s.sim: r for s in self.sims.values() if s.state == "running"
                 for r in [self.rate(s, since)] if r is not None}  # fmt: skip
        return progress_ratio(rates)


class SummaryRow(TypedDict):
    """A simulation in the closing table (and the session's JSON): its end or state so far, request, why."""

    sim: str
    state: str
    request_m: int
    profiled: bool
    makespan: float | None
    iterations: int | None
    retries: int
    reason: str
    job: NotRequired[str]
    """The Flux job id, added by the session's report (miniclusters/multiplex/report.py)."""
    mean_duty: NotRequired[float | None]
    """The mean duty cycle of its ranks, added by the session's report."""


def summary_rows(planner: MultiplexPlanner) -> list[SummaryRow]:
    """One row per simulation for the closing table: its end (or state so far), why, and its last iteration."""
    rows: list[SummaryRow] = []
    for rec in planner.sims.values():
        makespan = (rec.finished_at - rec.started_at) if rec.finished_at and rec.started_at else None
        rows.append(
            {
                "sim": rec.sim,
                "state": rec.state,
                "request_m": math.ceil(rec.demand.total_m),
                "profiled": rec.profiled,
                "makespan": makespan,
                "iterations": rec.iterations,
                "retries": rec.retries,
                "reason": rec.reason,
            }
        )
    return rows


def all_done(planner: MultiplexPlanner) -> bool:
    """Every simulation started ended done (the controller's exit code is 0 only then)."""
    return bool(planner.sims) and all(rec.state == "done" for rec in planner.sims.values())
