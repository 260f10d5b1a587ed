"""How the multiplexing planner takes the world's answers to its actions (and how it stops).

Part of `MultiplexPlanner` (see `multiplex.py`): submissions, per-job shares, cancels, resize answers (Deferred ->
back off and retry, Infeasible -> cap the plan), adopting an earlier controller's simulations, and the stop.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from elasticity.control.multiplex_state import PlannerState, sim_number
from elasticity.control.multiplex_types import CancelSimulation, ResizeAnswer, SimRecord, Terminal
from elasticity.policy.multiplex_requests import equal_demand

if TYPE_CHECKING:
    from elasticity.control.multiplex_ports import SharesResult


class PlannerAnswers(PlannerState):
    """The answers to the planner's actions, folded into its state."""

    def stop(self, now: float, state: Terminal, reason: str) -> list[CancelSimulation]:
        """The controller stops (timed out, interrupted): every simulation still pending or running ends as
        `state`; returns the cancels to carry out. Nothing starts afterwards."""
        cancels = [CancelSimulation(rec.sim, reason) for rec in self.active()]
        for rec in self.active():
            self._end(rec, state, now, reason)
        self.blocked = self.blocked or f"the controller stopped: {reason}"
        self.phase = "done"
        self._event(now, "controller-stop", state=state, reason=reason, cancelled=[c.sim for c in cancels])
        return cancels

    def adopt(self, submitted: Mapping[str, int], now: float) -> None:
        """Take over simulations an earlier controller submitted (sim -> how many times it was submitted): each
        is pending until observed, its demand the equal share until its profile is read again; nothing is
        submitted for them, and they count toward `total` as the earlier controller's did."""
        share = self.config.equal_per_rank_m / max(1, len(submitted))
        for name, attempts in sorted(submitted.items(), key=lambda item: sim_number(item[0])):
            demand = equal_demand(name, self.config.block_placement(), share)
            self.sims[name] = SimRecord(
                name, now, demand, retries=max(0, attempts - 1), restarts_at_submit=self.restarts
            )
        if submitted:
            self._event(now, "adopted", sims=sorted(submitted, key=sim_number))

    def simulation_started(self, sim: str, now: float, ok: bool, reason: str = "", job_id: str = "") -> None:
        rec = self.sims[sim]
        if ok:
            self._event(now, "submitted", sim=sim, job=job_id)
        else:
            self._end(rec, "failed", now, f"could not be submitted: {reason}")

    def shares_answered(self, now: float, level: str, results: list[SharesResult]) -> None:
        """What became of the per-job shares of the last SetJobShares, pod by pod."""
        for result in results:
            self._event(now, "job-shares", pod=result.pod, applied=result.applied, detail=result.detail, level=level)

    def cancel_failed(self, now: float, sim: str, reason: str) -> None:
        """A simulation ended by stop() whose job could not be cancelled: it may still run."""
        self._event(now, "cancel-failed", sim=sim, reason=reason)

    def resize_answered(self, now: float, answers: Mapping[int, tuple[ResizeAnswer, str]]) -> None:
        """Per-pod answers to the last ResizePods: Deferred -> back off and retry; Infeasible -> cap the plan."""
        deferred = {p: why for p, (a, why) in answers.items() if a == "deferred"}
        infeasible = {p: why for p, (a, why) in answers.items() if a == "infeasible"}
        for pod, (answer, why) in sorted(answers.items()):
            self._event(now, "resize-answer", pod=pod, answer=answer, reason=why)
        applied = sum(1 for a, _ in answers.values() if a not in ("deferred", "infeasible"))
        self.resizes += applied
        if deferred:
            self.deferrals += 1
            if self.deferrals > self.config.max_deferrals:
                infeasible.update(
                    {p: f"still deferred after {self.deferrals - 1} retries: {w}" for p, w in deferred.items()}
                )
                deferred = {}
        else:
            self.deferrals = 0
        if infeasible:
            current = self._last_requests
            for pod, why in infeasible.items():
                self.pod_ceiling_m[pod] = current.get(pod, self.config.floor_m)
                self.refused.add((pod, self._asked.get(pod, -1)))
                self.blocked = f"pod {pod}: resize infeasible ({why}); plan shrunk, no more simulations packed"
            self._event(now, "plan-shrunk", ceilings=dict(self.pod_ceiling_m), reason=self.blocked)
        if deferred:
            self.backoff = min(self.config.backoff_max, max(self.config.backoff_initial, self.backoff * 2))
            self.deferred_until = now + self.backoff
            self._event(now, "resize-deferred", pods=sorted(deferred), retry_in=self.backoff)
        elif any(a in ("accepted", "in-progress") for a, _ in answers.values()):
            self.backoff = 0.0
            self.deferred_until = now + self.config.backoff_initial  # let the kubelet apply it before asking again
        else:
            self.backoff = 0.0
            self.deferred_until = None
        self.last_change_at = now
