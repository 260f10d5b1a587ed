"""Run a campaign on a MiniCluster that is up: submit its ensembles, run both loops through one plan, collect.

Every tick: observe (cluster view through the Observer port, the lead's queue and job list, the members' files
and traces) -> `CampaignPlanner.decide` -> act through the ports (`Actuator.scale`, `Actuator.resize_many`, the
queue's drain). Every decision and answer goes to the JSON-lines event log, a `sample` per tick (size, requested
and allocatable CPU) feeds the timeline, and the state file feeds `minicluster status` / `minicluster campaign`.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from broker.jobs.api import JobInfo
from broker.jobs.jobid import parse_jobid
from elasticity.control.campaign import (
    CampaignObservation,
    CampaignPlanner,
    EnsembleView,
    MultiplexKnobs,
)
from elasticity.control.events import EventLog, read_events
from elasticity.control.ports import Actuator, ActuatorError, ClusterView, Observer
from elasticity.policy.autoscale import AutoscaleOptions, QueueView
from miniclusters.autoscaling.queue import ExecQueue
from miniclusters.backends.base import Backend, BackendError
from miniclusters.campaign.observe import Profiles, job_times, lead_jobs, observe_ensembles, ran_on
from miniclusters.campaign.plan import ENDED, CampaignPlan, batch_script, batch_submit, reset_member
from miniclusters.campaign.progress import CampaignProgress, Outcome, adopt
from miniclusters.campaign.samples import MemberEvent, Sample, Samples

MAX_RERUNS = 1
"""How often an ensemble's lost members (their sub-instance died under them) are run again."""
SETTLE_GRACE = 20.0
"""Seconds past idle + cool-down the campaign waits, once done, for the cluster to shrink back to its floor."""


@dataclass
class Loops:
    """Which loops run (None: off) and how often the controller looks."""

    autoscale: AutoscaleOptions | None
    multiplex: MultiplexKnobs | None
    interval: float = 1.0


@dataclass
class CampaignRunner:
    backend: Backend
    name: str
    plan: CampaignPlan
    loops: Loops
    log: EventLog
    flux: list[str]
    lead_uri: str
    say: Callable[[str], None] = print
    clock: Callable[[], float] = time.monotonic
    observer: Observer | None = None
    actuator: Actuator | None = None
    jobs: dict[str, int] = field(default_factory=dict)
    cancelled: set[str] = field(default_factory=set)
    views: tuple[EnsembleView, ...] = ()
    last_view: ClusterView | None = None
    t0: float = 0.0
    samples: Samples = field(default_factory=Samples)
    resizes: int = 0
    scale_events: int = 0
    ended_at: dict[str, float] = field(default_factory=dict)
    started_at: dict[str, float] = field(default_factory=dict)
    ensemble_pods: dict[str, tuple[int, ...]] = field(default_factory=dict)
    _states: dict[str, str] = field(default_factory=dict)
    on_tick: Callable[[CampaignRunner], None] | None = None
    script_env: dict[str, str] = field(default_factory=dict)
    """The environment the batch scripts export (OpenFOAM's variables, the MPI settings)."""
    reruns: dict[str, int] = field(default_factory=dict)
    jobs_of: Callable[[], Mapping[int, JobInfo] | None] | None = None
    """Every job of the lead by id (None: no answer this time); default: the lead's socket at `lead_uri`."""
    done_at: float | None = None
    wall: Callable[[], float] = time.time
    started_wall: float = 0.0
    """Wall-clock seconds when the campaign began (kept by a resumed runner)."""
    outcome: Outcome | None = None

    def __post_init__(self) -> None:
        if self.observer is None or self.actuator is None:
            from miniclusters.backends.ports import ports_for

            self.observer, self.actuator = ports_for(self.backend)
        self.queue = ExecQueue(self.backend, lambda _name: self.flux)
        self.planner = CampaignPlanner(self.loops.autoscale, self.loops.multiplex)
        view = self.observer.observe(self.name)
        hosts = {f"{self.name}-{i}": i for i in range(view.max_size)}
        self.profiles = Profiles(self.plan.ranks, hosts)
        self.t0 = self.clock()

    # ------------------------------------------------------------------ acting
    def now(self) -> float:
        return self.clock() - self.t0

    @property
    def cpu_seconds(self) -> float:
        """CPU-seconds requested so far (integrated over the samples)."""
        return self.samples.cpu_seconds

    @property
    def _last_requested(self) -> int:
        return self.samples.requested_m

    def event(self, kind: str, **fields: Any) -> None:
        self.log.write(kind, cluster=self.name, t=round(self.now(), 3), **fields)

    def submit(self, index: int) -> bool:
        ensemble = self.plan.ensembles[index]
        argv = batch_submit(ensemble, self.flux)
        try:
            result = self.backend.exec(self.name, 0, argv)
        except BackendError as exc:
            return self._submit_failed(ensemble.name, str(exc))
        words = result.stdout.split()
        if result.rc != 0 or not words:
            return self._submit_failed(ensemble.name, (result.stderr or result.stdout).strip())
        self.jobs[ensemble.name] = parse_jobid(words[-1])
        self.event("submitted", ensemble=ensemble.name, job=words[-1], members=len(ensemble.members))
        self.say(f"ensemble {ensemble.name}: flux batch -N {ensemble.nodes} -> job {words[-1]}")
        return True

    def _submit_failed(self, ensemble: str, reason: str) -> bool:
        """Said, not only logged: a script the lead cannot read (a work directory the pods do not see) shows here."""
        self.event("submit-failed", ensemble=ensemble, reason=reason)
        self.say(f"ensemble {ensemble}: flux batch failed: {reason}")
        return False

    def submit_due(self) -> None:
        """All at once, or (sequential) the next one once every earlier one ended."""
        for i, ensemble in enumerate(self.plan.ensembles):
            if ensemble.name in self.jobs or ensemble.name in self.cancelled:
                continue
            if self.plan.sequential and any(
                self._states.get(e.name) not in ("done", "cancelled") for e in self.plan.ensembles[:i]
            ):
                return
            if not self.submit(i):
                self.cancelled.add(ensemble.name)
                self.event("ensemble-failed", ensemble=ensemble.name, reason="could not be submitted")

    def _act(self, obs: CampaignObservation) -> None:
        assert self.actuator is not None
        decision = self.planner.decide(obs)
        for record in self.planner.events:
            fields = {k: v for k, v in record.items() if k not in ("event", "t")}
            self.event(str(record["event"]), **fields)
        self.planner.events.clear()
        if decision.drain is not None:
            mine = decision.drain - (obs.queue.draining - obs.queue.owned)
            if mine != obs.queue.owned:
                try:
                    self.queue.drain(self.name, mine)
                    self.event("drain", ranks=sorted(mine), reason=decision.reason or "surplus ranks")
                except ActuatorError as exc:
                    self.event("error", error=str(exc))
        if decision.size is not None:
            self.event("decision", loop="autoscale", size=decision.size, reason=decision.reason)
            try:
                result = self.actuator.scale(self.name, decision.size)
            except ActuatorError as exc:
                self.event("error", error=str(exc))
            else:
                self.scale_events += 1
                self.event("scaled", previous=result.previous, size=result.size, reason=decision.reason)
                self._resample(self.samples.after_scale(result.size, self.now()))
                self.say(f"{self._clock()} size {result.previous} -> {result.size} ({decision.reason})")
        if decision.cpu:
            self.event("decision", loop="multiplex", cpu=decision.cpu)
            try:
                answers = self.actuator.resize_many(self.name, decision.cpu)
            except ActuatorError as exc:
                self.event("error", error=str(exc))
                return
            for pod, answer in sorted(answers.items()):
                if answer.ok:
                    self.resizes += 1
                self.event(
                    "resize",
                    pod=pod,
                    outcome=answer.outcome.value,
                    cpu_requested=answer.cpu_requested,
                    reason=answer.reason,
                )
            taken = {pod: answer.cpu_requested for pod, answer in answers.items() if answer.ok}
            self._resample(self.samples.after_resize(taken, self.now()))
            shown = ", ".join(f"pod {p} {m}m" for p, m in sorted(decision.cpu.items()))
            self.say(f"{self._clock()} resize {shown}")

    # ------------------------------------------------------------------ observing
    def observe(self) -> CampaignObservation | None:
        assert self.observer is not None
        infos = self.jobs_of() if self.jobs_of is not None else lead_jobs(self.lead_uri)
        if infos is None:
            return None
        view = self.observer.observe(self.name)
        try:
            queue = self.queue.queue(self.name)
        except ActuatorError:
            queue = QueueView()
        self.views = observe_ensembles(self.plan, self.jobs, infos, self.profiles, frozenset(self.cancelled))
        now = self.now()
        self._transitions(now, infos)
        self._sample(view, queue, now)
        self.last_view = view
        return CampaignObservation(now, view, queue, self.views)

    def _transitions(self, now: float, infos: Mapping[int, JobInfo]) -> None:
        for ensemble in self.views:
            old = self._states.get(ensemble.name)
            if ensemble.state != old:
                self._states[ensemble.name] = ensemble.state
                job = self.jobs.get(ensemble.name)
                times = job_times(infos.get(job) if job is not None else None)
                if ensemble.state in ("done", "cancelled") and old != "running" and "job_run" in times:
                    # it ran between two looks: its run is still recorded, with the pods and times the lead kept
                    pods = ran_on(infos.get(job) if job is not None else None)
                    self.event("ensemble-running", ensemble=ensemble.name, pods=list(pods), job_run=times["job_run"])
                if ensemble.state == "running":
                    self.started_at[ensemble.name] = now
                    self.ensemble_pods[ensemble.name] = ensemble.pods
                    times.pop("job_end", None)
                if ensemble.state in ("done", "cancelled"):
                    self.ended_at[ensemble.name] = now
                    times.pop("job_run", None)
                self.event(f"ensemble-{ensemble.state}", ensemble=ensemble.name, pods=list(ensemble.pods), **times)
                if ensemble.state == "done" and self._rerun_lost(ensemble.name):
                    continue  # its lost members run again: not failed
                self.say(
                    f"{self._clock()} ensemble {ensemble.name}: {ensemble.state}"
                    + (f" on pods {list(ensemble.pods)}" if ensemble.pods else "")
                )
            for member in ensemble.members:
                key = f"{ensemble.name}/{member.name}"
                state = member.state + ("+profiled" if member.duty is not None else "")
                if self._states.get(key) != state:
                    self._states[key] = state
                    fields: MemberEvent = {"ensemble": ensemble.name, "member": member.name, "state": member.state}
                    if member.duty is not None:
                        fields["duty"] = [round(d, 4) for d in member.duty]
                        fields["pods"] = list(member.rank_pods or ())
                    self.event("member", **fields)
                    if member.state in ("done", "failed"):
                        self.say(f"{self._clock()} member {member.name}: {member.state}")

    def _rerun_lost(self, name: str) -> bool:
        """Members whose sub-instance ended under them (no end record: a lost pod, not a failed solver) run again
        in a new sub-instance, at most MAX_RERUNS times; after that they are reported failed with the reason."""
        ensemble = self.plan.ensemble(name)
        lost = tuple(m for m in ensemble.members if not (m.directory / ENDED).exists())
        if not lost or name in self.cancelled:
            return False
        if self.reruns.get(name, 0) >= MAX_RERUNS:
            self.event(
                "rerun-refused",
                ensemble=name,
                members=[m.name for m in lost],
                reason=f"already rerun {MAX_RERUNS} time(s): reported failed",
            )
            return False
        self.reruns[name] = self.reruns.get(name, 0) + 1
        for member in lost:
            reset_member(member, self.plan.workdir)
            self.profiles.found.pop(member.name, None)
        again = replace(ensemble, members=lost)
        again.script.write_text(batch_script(again, self.plan.ranks, self.plan.profile_iterations, self.script_env))
        self.event(
            "ensemble-rerun",
            ensemble=name,
            members=[m.name for m in lost],
            attempt=self.reruns[name] + 1,
            reason="its sub-instance ended before these members did (a lost pod)",
        )
        self.say(f"{self._clock()} ensemble {name}: rerunning {', '.join(m.name for m in lost)} (a pod was lost)")
        index = self.plan.ensembles.index(ensemble)
        del self.jobs[name]
        if not self.submit(index):
            return False
        self._states[name] = "queued"
        self.views = tuple(replace(v, state="queued", pods=()) if v.name == name else v for v in self.views)
        return True

    def _sample(self, view: ClusterView, queue: QueueView, now: float) -> None:
        self._resample(self.samples.observed(view, queue, now))

    def _resample(self, fields: Sample | None) -> None:
        """A `sample` record (the timeline's CPU and size curves), when there is one to write."""
        if fields is not None:
            self.event("sample", **fields)

    def _clock(self) -> str:
        return f"[{self.now():6.1f}s]"

    # ------------------------------------------------------------------ the loop
    def finished(self) -> bool:
        return (
            bool(self.views)
            and all(e.state in ("done", "cancelled") or e.name in self.cancelled for e in self.views)
            and len(self.jobs) + len([c for c in self.cancelled if c not in self.jobs]) >= len(self.plan.ensembles)
        )

    def step(self) -> None:
        self.submit_due()
        obs = self.observe()
        if obs is not None:
            self._act(obs)
        if self.on_tick is not None:
            self.on_tick(self)

    def begin(self) -> None:
        self.started_wall = self.wall()
        self.event(
            "campaign-start",
            ensembles=[e.name for e in self.plan.ensembles],
            members=len(self.plan.members),
            loops={"autoscale": self.loops.autoscale is not None, "multiplex": self.loops.multiplex is not None},
        )

    def over(self) -> bool:
        """After a step: True (and the campaign-end event written) once every ensemble ended and the cluster
        settled back to its floor."""
        if not self.finished():
            return False
        self.done_at = self.now() if self.done_at is None else self.done_at
        if not self._settled(self.done_at):
            return False
        self.event("campaign-end", state="done", cpu_seconds=round(self.cpu_seconds, 1))
        self.outcome = "done"
        return True

    def run(self, timeout: float | None = None) -> str:
        """Tick until every ensemble ended ("done"), or the timeout ("timeout"); Ctrl-C/SIGTERM cancel ("cancelled")."""
        self.begin()
        try:
            while True:
                self.step()
                if self.over():
                    return "done"
                if timeout is not None and self.now() > timeout:
                    self.cancel(f"campaign timeout after {timeout:g}s")
                    return "timeout"
                time.sleep(self.loops.interval)
        except KeyboardInterrupt:
            self.cancel("interrupted (Ctrl-C, `minicluster campaign cancel` or `minicluster down`)")
            raise

    def _settled(self, done_at: float) -> bool:
        """With the autoscaler on, the campaign ends once the cluster has shrunk back to its floor (drained, then
        scaled down), or after idleSeconds + cooldownSeconds + SETTLE_GRACE seconds if it cannot."""
        options = self.loops.autoscale
        view = self.last_view
        if options is None or view is None or view.size <= view.sizes.minimum:
            return True
        return self.now() - done_at > options.idle_seconds + options.cooldown_seconds + SETTLE_GRACE

    def cancel(self, reason: str) -> None:
        """Cancel every ensemble not ended (its sub-instance and members with it) and record why."""
        for ensemble in self.plan.ensembles:
            if self._states.get(ensemble.name) in ("done", "cancelled"):
                continue
            self.cancelled.add(ensemble.name)
            job = self.jobs.get(ensemble.name)
            if job is not None:
                with contextlib.suppress(BackendError):
                    self.backend.exec(self.name, 0, [*self.flux, "cancel", str(job)])
            self.event("ensemble-cancelled", ensemble=ensemble.name, reason=reason)
        with contextlib.suppress(Exception):
            self.observe()
        self.event("campaign-end", state="cancelled", reason=reason, cpu_seconds=round(self.cpu_seconds, 1))
        self.outcome = "cancelled"

    # ------------------------------------------------------------------ outliving the process
    def progress(self, spec: str) -> CampaignProgress:
        """What another runner needs to go on from here (progress.py): recorded after every step that changed it."""
        return CampaignProgress(
            spec, dict(self.jobs), dict(self.reruns), tuple(sorted(self.cancelled)), self.started_wall, self.outcome
        )

    def resume(self, progress: CampaignProgress, attempts: int = 3, pause: float = 1.0) -> None:
        """Go on from ``progress`` instead of beginning: the recorded jobs (and any the lead ran for an ensemble
        after the record was written) are this runner's; the event log written so far gives each ensemble's and
        member's last state, so only what changed since is logged. Raises ActuatorError when the lead does not
        answer: without its job list an unrecorded submission could be made twice."""
        infos = None
        for attempt in range(attempts):
            infos = self.jobs_of() if self.jobs_of is not None else lead_jobs(self.lead_uri)
            if infos is not None:
                break
            if attempt + 1 < attempts:
                time.sleep(pause)
        if infos is None:
            raise ActuatorError("the lead does not answer `flux jobs`: cannot tell which ensembles it already runs")
        lead = {job: (info.name, info.t_submit) for job, info in infos.items()}
        jobs = adopt(progress, tuple(e.name for e in self.plan.ensembles), lead)
        self.reruns = dict(progress.reruns)
        for name, job in jobs.items():
            if name in progress.jobs and job != progress.jobs[name]:
                self.reruns[name] = self.reruns.get(name, 0) + 1
        self.jobs = jobs
        self.cancelled = set(progress.cancelled)
        self.started_wall = progress.started
        self.t0 = self.clock() - max(0.0, self.wall() - progress.started)
        self._states.update(replayed_states(self.log_path))
        adopted = sorted(name for name, job in jobs.items() if progress.jobs.get(name) != job)
        self.event("campaign-resume", jobs={n: j for n, j in sorted(jobs.items())}, adopted=adopted)
        self.say(f"{self._clock()} campaign resumed: {len(jobs)} ensembles submitted earlier")

    @property
    def log_path(self) -> Path | None:
        return self.log.path


def replayed_states(path: Path | None) -> dict[str, str]:
    """Each ensemble's and member's last state in an event log, keyed as CampaignRunner._states keys them."""
    if path is None or not path.exists():
        return {}
    states: dict[str, str] = {}
    for record in read_events(path):
        kind = str(record.get("kind", ""))
        if kind.startswith("ensemble-") and kind != "ensemble-rerun" and "ensemble" in record:
            states[str(record["ensemble"])] = kind.removeprefix("ensemble-")
        elif kind == "ensemble-rerun":
            states[str(record["ensemble"])] = "queued"
        elif kind == "member":
            state = str(record["state"]) + ("+profiled" if record.get("duty") is not None else "")
            states[f"{record['ensemble']}/{record['member']}"] = state
    return states
