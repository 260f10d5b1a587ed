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
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, cast

from elasticity.control.multiplex_learning import ThroughputLearning
from elasticity.control.multiplex_types import (
    TERMINAL,
    Action,
    CancelSimulation,
    MultiplexConfig,
    Observation,
    Phase,
    Profile,
    ResizeAnswer,
    ResizePods,
    SetJobShares,
    SimRecord,
    SimulationView,
    StartSimulation,
    Terminal,
)
from elasticity.model.throughput import Geometry, ThroughputModel
from elasticity.policy.fairness import fairness_step, progress_ratio
from elasticity.policy.multiplex_requests import (
    PodPlan,
    SimulationDemand,
    apply_fairness,
    equal_demand,
    plan_pods,
    pod_need_from_ranks,
)

if TYPE_CHECKING:
    from elasticity.control.multiplex_ports import SharesResult


def _sim_number(name: str) -> tuple[int, str]:
    """sim10 after sim9 (names are sim<N>)."""
    digits = name.removeprefix("sim")
    return (int(digits), "") if digits.isdigit() else (1 << 30, name)


@dataclass
class MultiplexPlanner:
    """Remembers what it decided and what the world answered; decide() is the only entry point per tick."""

    config: MultiplexConfig
    sims: dict[str, SimRecord] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
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

    # ------------------------------------------------------------------ events
    def _event(self, now: float, kind: str, **fields: Any) -> None:
        self.events.append({"t": round(now, 3), "event": kind, **fields})

    # ------------------------------------------------------------------ helpers
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

    # ------------------------------------------------------------------ how a simulation ends
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

    def _resubmitted(self, rec: SimRecord, now: float) -> None:
        rec.submitted_at, rec.restarts_at_submit, rec.pod_down = now, self.restarts, False

    # ------------------------------------------------------------------ the answers to our actions
    def adopt(self, submitted: Mapping[str, int], now: float) -> None:
        """Take over simulations an earlier controller submitted (sim -> how many times it was submitted): each
        is pending until observed, its demand the equal share until its profile is read again; nothing is
        submitted for them, and they count toward `total` as the earlier controller's did."""
        share = self.config.equal_per_rank_m / max(1, len(submitted))
        for name, attempts in sorted(submitted.items(), key=lambda item: _sim_number(item[0])):
            demand = equal_demand(name, self.config.block_placement(), share)
            self.sims[name] = SimRecord(
                name, now, demand, retries=max(0, attempts - 1), restarts_at_submit=self.restarts
            )
        if submitted:
            self._event(now, "adopted", sims=sorted(submitted, key=_sim_number))

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

    # ------------------------------------------------------------------ one tick
    def decide(self, obs: Observation) -> list[Action]:
        now = obs.now
        actions: list[Action] = []
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
        changed = self._absorb(obs, actions)

        # the plan: every pod's request = sum of its simulations' needs
        plan = self.desired_plan()
        if self.deferred_until is not None and now < self.deferred_until:
            self.phase = "resize"
            return actions
        wanted = self._wanted(plan, obs)
        if wanted or (changed and plan != self.planned):
            if wanted:
                self._asked = dict(wanted)
                actions.append(ResizePods(wanted, self._why(changed)))
                self._event(now, "resize", requests=wanted, total_m=plan.total_m, reason=self._why(changed))
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

    def _wanted(self, plan: PodPlan, obs: Observation) -> dict[int, int]:
        """Pods whose request must change, minus requests already refused as Infeasible."""
        return {
            p: m for p, m in plan.requests_m.items() if obs.pod_requests_m.get(p) != m and (p, m) not in self.refused
        }

    def _why(self, changed: set[str]) -> str:
        return ", ".join(sorted(changed)) or "plan"

    def _profiling(self) -> bool:
        """A simulation is pending or not yet profiled: its demand is unknown, so nothing else is decided."""
        return any(s.state == "pending" or (s.state == "running" and not s.profiled) for s in self.sims.values())

    def _may_start_more(self) -> bool:
        return self.blocked is None and len(self.sims) < self.config.total

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

    def _submit(self, name: str, now: float, demand: SimulationDemand, actions: list[Action]) -> None:
        self.sims[name] = SimRecord(name, now, replace(demand, sim=name), restarts_at_submit=self.restarts)
        self._noted = None
        actions.append(StartSimulation(name, self.config.profile_iterations))
        self._event(now, "start", sim=name, concurrent=len(self.active()))

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

    def _note_once(self, now: float, kind: str, reason: str) -> None:
        """Why packing waits, once per reason kind until something is packed (a refitted beta that moves the
        predicted efficiency by a point is not news)."""
        if self._noted != kind:
            self._noted = kind
            self._event(now, kind, reason=reason)

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


def summary_rows(planner: MultiplexPlanner) -> list[dict[str, Any]]:
    """One row per simulation for the closing table: its end (or state so far), why, and its last iteration."""
    rows = []
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
