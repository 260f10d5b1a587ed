"""How the multiplexing planner folds one observation into its records (part of `MultiplexPlanner`).

Simulations coming up, ending (done, failed, cancelled, timeout), failing because a pod was lost (resubmitted, at
most `max_retries` times), not starting within `start_timeout`, being profiled; and the iteration rates filed by N
for the throughput model.
"""

from __future__ import annotations

from typing import cast

from elasticity.control.multiplex_state import PlannerState
from elasticity.control.multiplex_types import (
    TERMINAL,
    Action,
    CancelSimulation,
    Observation,
    Profile,
    SimRecord,
    SimulationView,
    StartSimulation,
    Terminal,
)
from elasticity.policy.multiplex_requests import SimulationDemand, equal_demand, pod_need_from_ranks


class PlannerObservation(PlannerState):
    """Observations folded into the planner's records."""

    def _absorb(self, obs: Observation, actions: list[Action]) -> set[str]:
        """Fold the observation into the records; returns what changed the plan."""
        cfg = self.config
        now = obs.now
        changed: set[str] = set()
        if not self.sims:
            self._event(now, "controller-start", requests={str(p): m for p, m in obs.pod_requests_m.items()},
                        total_m=sum(obs.pod_requests_m.values()), allocatable_m=obs.allocatable_m)  # fmt: skip
            together = min(cfg.profile_together, cfg.total)
            for _ in range(together):  # they split the rigid allocation: the pods' requests do not change
                name = self._next_name()
                demand = equal_demand(name, cfg.block_placement(), cfg.equal_per_rank_m / together)
                self._submit(name, now, demand, actions)
            changed.add("first simulation" if together == 1 else f"first {together} simulations")
        running_now = self.running_count()
        for rec in list(self.sims.values()):
            view = obs.simulations.get(rec.sim)
            if view is None or rec.state in TERMINAL:
                continue
            if view.iterations is not None:
                rec.iterations = view.iterations
            if view.state == "running" and rec.state == "pending":
                rec.state = "running"
                rec.started_at = now
                self._event(now, "running", sim=rec.sim)
            if view.state in TERMINAL:
                if view.state != "failed":
                    self._end(rec, cast(Terminal, view.state), now, "" if view.state == "done" else view.reason)
                elif self._failed(rec, view, now, actions):
                    if rec.state == "pending":
                        changed.add(f"{rec.sim} resubmitted")
                    continue  # resubmitted, or waiting for a sign of a lost pod
                changed.add(f"{rec.sim} {rec.state}")
                continue
            rec.failing_since = None
            if rec.state == "pending" and now - rec.submitted_at > cfg.start_timeout:
                why = f"not running {cfg.start_timeout:g}s after submission (partial deployment); cancelled"
                actions.append(CancelSimulation(rec.sim, why))
                self._end(rec, "cancelled", now, why)
                changed.add(f"{rec.sim} cancelled")
                continue
            if view.iterations is not None and rec.state == "running":
                rec.samples.append((now, view.iterations, running_now))
            if view.profile is not None and not rec.profiled and rec.state == "running":
                rec.demand = self._profiled_demand(rec.sim, view.profile)
                rec.duty = tuple(max(0.0, min(1.0, d)) for d in view.profile.duty)
                rec.profiled = True
                self._event(
                    now,
                    "profiled",
                    sim=rec.sim,
                    need_m={str(p): round(m) for p, m in rec.demand.pod_need_m.items()},
                    mean_duty=round(sum(view.profile.duty) / len(view.profile.duty), 4),
                )
                changed.add(f"{rec.sim} profiled")
                self._rate_from_profile(now, rec, view.profile)
        self._record_rates(now, running_now)
        return changed

    def _failed(self, rec: SimRecord, view: SimulationView, now: float, actions: list[Action]) -> bool:
        """A failed job: resubmit it when a pod was lost under it (bounded); otherwise wait `failure_grace` for
        such a sign (a pod's restart is counted after its back-off) before it ends failed. True: not ended."""
        cfg = self.config
        lost = view.lost or rec.pod_down or self.restarts > rec.restarts_at_submit
        if lost and rec.retries < cfg.max_retries:
            rec.retries += 1
            self._event(now, "retry", sim=rec.sim, attempt=rec.retries + 1, reason=view.reason)
            rec.state, rec.started_at, rec.failing_since = "pending", None, None
            rec.samples.clear()
            self._resubmitted(rec, now)
            actions.append(StartSimulation(rec.sim, cfg.profile_iterations))
            return True
        if not lost:
            rec.failing_since = now if rec.failing_since is None else rec.failing_since
            if now - rec.failing_since < cfg.failure_grace:
                return True
        why = view.reason + (f"; a pod was lost, given up after {rec.retries} retries" if lost else "")
        self._end(rec, "failed", now, why)
        return False

    def _rate_from_profile(self, now: float, rec: SimRecord, profile: Profile) -> None:
        """A simulation profiled alone at its equal allocation measured the model's N=1 reference already.

        Alone means no other one pending either: one started beside it may not be seen running yet (started
        together, its job still starting) while it already shares the pods."""
        alone = self.active() == [rec]
        if alone and self.learning.reference(profile.iteration_rate):
            self._event(now, "reference-rate", sim=rec.sim, n=1, rate=round(profile.iteration_rate or 0.0, 3))

    def _profiled_demand(self, sim: str, profile: Profile) -> SimulationDemand:
        cfg = self.config
        alloc = profile.allocation_m or tuple(cfg.equal_per_rank_m for _ in profile.duty)
        need = [max(0.0, min(1.0, d)) * a * cfg.headroom for d, a in zip(profile.duty, alloc, strict=True)]
        return SimulationDemand(sim, pod_need_from_ranks(need, profile.placement))

    def _record_rates(self, now: float, n: int) -> None:
        """Per running simulation, the rate since the last change (once settled), filed under N = `n`, the number
        that ran through that window. Nothing is filed in a step where that number changed (one ended or came
        up): the window's rates belong to the N before, and the survivor's alone would be filed as the N after."""
        if now - self.last_change_at < self.config.settle_time * 2 or n == 0 or self.running_count() != n:
            return
        rates = [r for rec in self.sims.values() if rec.state == "running" and rec.profiled
                 for r in [self.rate(rec, self.last_change_at + self.config.settle_time)] if r]  # fmt: skip
        if len(rates) == n:
            self.learning.file(n, rates)
            refit = self.learning.refit(self._geometry(), self._cpu_demand(), self._knee)
            if refit is not None:
                self._event(now, "refit", **refit)
