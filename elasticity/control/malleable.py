"""The live malleable loop: a trace's jobs submitted to one Flux instance as they arrive, and started, shrunk and
expanded by the policy functions the simulator calls, through the same checked pass (`plan_pass`).

The unit that changes size is a Flux job inside one MiniCluster (docs/malleable.md says why). A resize is a
checkpoint and a restart: the job is signalled (its contract, broker/jobs/malleable.py), checkpoints at its next
safe point and exits; the loop submits it again on the new node count, from the checkpoint. As in the simulator,
the policy is asked when jobs arrive or end; its shrinks are carried out first and the starts and expands that
need their nodes wait until they are done. A job that ignores the signal past its timeout keeps its size (an
event says so, and the policy is asked again); one whose ranks fail while it resizes fails with a reason naming
the resize. One observe → plan → act step per tick, with an injected clock, as elasticity/control/loop.py.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from elasticity.control.events import EventLog
from elasticity.model.speedup import Amdahl, JobSize
from elasticity.policy.scheduling.actions import Actions, plan_pass
from elasticity.policy.scheduling.registry import SchedulingPolicy
from elasticity.policy.scheduling.types import Resize, RunningJob, Snapshot, WaitingJob


@dataclass(frozen=True)
class LiveJob:
    """One job of the trace, as the loop submits it."""

    index: int
    """The policy's job id (its place in the workload)."""
    name: str
    submit: float
    """Seconds after the run starts."""
    size: JobSize
    runtime: float
    """Seconds at its preferred size."""
    estimate: float
    """Requested seconds at its preferred size (what the policy plans with)."""
    priority: int = 1
    model: Amdahl = field(default_factory=lambda: Amdahl(0.0))

    def runtime_on(self, nodes: int) -> float:
        return self.model.runtime(self.runtime, self.size.pref, nodes)


class Phase(StrEnum):
    PENDING = "pending"
    """Submitted, not running yet (the instance is starting it)."""
    RUNNING = "running"
    CHECKPOINTED = "checkpointed"
    """Ended after writing its checkpoint: it goes on when submitted again."""
    DONE = "done"
    FAILED = "failed"


@dataclass(frozen=True)
class Observation:
    phase: Phase
    progress: float = 0.0
    """Fraction of the job's work done, in [0, 1]."""
    reason: str = ""


class MalleableJobs(Protocol):
    """What the loop needs of the instance that runs the jobs (miniclusters/malleable/flux_jobs.py)."""

    def submit(self, job: LiveJob, nodes: int) -> None:
        """Start the job on `nodes` nodes: from its checkpoint when it has one."""
        ...

    def resize(self, job: LiveJob) -> bool:
        """Ask the running job to checkpoint and exit (its contract's signal); False when it cannot be asked yet
        (still starting: a signal then would reach its launcher, not its ranks), so the loop asks again later."""
        ...

    def observe(self, job: LiveJob) -> Observation: ...


@dataclass
class _State:
    job: LiveJob
    phase: str = "future"
    """future, waiting, running, resizing, done, failed."""
    nodes: int = 0
    target: int = 0
    asked: float = 0.0
    signalled: bool = False
    """The resize request reached the job (one still starting is asked once it runs)."""
    start: float = math.nan
    end: float = math.nan
    since: float = 0.0
    node_seconds: float = 0.0
    expands: int = 0
    shrinks: int = 0
    last_resize: float = -math.inf
    reason: str = ""
    progress: float = 0.0
    ignored: bool = False
    """It let a resize time out: from then on the policy sees it as rigid at its size."""
    final: int = 0
    """The nodes it ended on."""
    history: list[tuple[float, int]] = field(default_factory=list)
    """(time, nodes held from then on), one entry per change: the timeline figure's row."""

    def hold(self, now: float, nodes: int) -> None:
        """Account the nodes held so far and hold `nodes` from now."""
        self.node_seconds += self.nodes * max(0.0, now - self.since)
        self.final = self.nodes or self.final
        self.since, self.nodes = now, nodes
        self.history.append((now, nodes))


@dataclass
class MalleableLoop:
    jobs: Sequence[LiveJob]
    nodes: int
    policy: SchedulingPolicy
    port: MalleableJobs
    policy_name: str = "policy"
    resize_timeout: float = 60.0
    clock: Callable[[], float] = time.monotonic
    log: EventLog | None = None
    origin: float = math.nan
    states: dict[int, _State] = field(default_factory=dict)
    busy: list[tuple[float, int]] = field(default_factory=lambda: [(0.0, 0)])
    resizes: int = 0
    _deferred: Actions | None = None
    _events: bool = False

    def __post_init__(self) -> None:
        for job in self.jobs:
            if job.size.max > self.nodes:
                raise ValueError(f"job {job.name} may grow to {job.size.max} nodes; the instance has {self.nodes}")
        self.states = {job.index: _State(job) for job in self.jobs}

    def now(self) -> float:
        if math.isnan(self.origin):
            self.origin = self.clock()
        return self.clock() - self.origin

    @property
    def finished(self) -> bool:
        return all(state.phase in ("done", "failed") for state in self.states.values())

    def step(self) -> list[str]:
        """Observe arrivals and the running jobs, plan when something changed and nothing is in flight, act."""
        now = self.now()
        acted: list[str] = []
        for state in self.states.values():
            if state.phase == "future" and state.job.submit <= now:
                state.phase, self._events = "waiting", True
            elif state.phase in ("running", "resizing"):
                acted += self._observe(state, now)
        if self._deferred is not None and not self._shrinking():
            acted += self._act_deferred(now)
        if self._events and self._deferred is None and not self._resizing():
            self._events = False
            snapshot = self._snapshot(now)
            if snapshot.waiting or any(run.size.malleable for run in snapshot.running):
                acted += self._act(plan_pass(self.policy, snapshot, self.policy_name), now)
        self._note_busy(now)
        for line in acted:
            self._event(line)
        return acted

    def run(self, sleep: Callable[[float], None] = time.sleep, interval: float = 0.5, limit: float = math.inf) -> None:
        """Step until every job has ended (or `limit` seconds): the live run."""
        while not self.finished and self.now() < limit:
            self.step()
            sleep(interval)

    # observe ---------------------------------------------------------------------------------------------------

    def _observe(self, state: _State, now: float) -> list[str]:
        job = state.job
        seen = self.port.observe(job)
        state.progress = seen.progress
        if seen.phase == Phase.DONE:
            state.hold(now, 0)
            state.phase, state.end, self._events = "done", now, True
            return [f"{job.name}: done on {state.final} nodes"]
        if seen.phase == Phase.FAILED:
            during = f" while resizing from {state.nodes} to {state.target} nodes" if state.phase == "resizing" else ""
            state.reason = f"failed{during}: {seen.reason or 'its Flux job failed'}"
            state.hold(now, 0)
            state.phase, state.end, self._events = "failed", now, True
            return [f"{job.name}: {state.reason}"]
        if seen.phase == Phase.CHECKPOINTED:
            nodes = state.target if state.phase == "resizing" else state.nodes
            if state.phase == "resizing":
                grew = nodes > state.nodes
                state.expands += grew
                state.shrinks += not grew
                self.resizes += 1
            state.hold(now, nodes)
            self.port.submit(job, nodes)
            state.phase, state.last_resize = "running", now
            return [f"{job.name}: restarted from its checkpoint on {nodes} nodes"]
        if state.phase == "resizing" and not state.signalled:
            state.signalled = self.port.resize(job)
        if state.phase == "resizing" and now - state.asked > self.resize_timeout:
            state.phase, state.target, state.ignored, self._events = "running", 0, True, True
            self._deferred = None  # what waited on this shrink is planned again
            return [f"{job.name}: did not checkpoint within {self.resize_timeout:g} s; it keeps {state.nodes} nodes"]
        return []

    def _resizing(self) -> bool:
        return any(state.phase == "resizing" for state in self.states.values())

    def _shrinking(self) -> bool:
        return any(s.phase == "resizing" and s.target < s.nodes for s in self.states.values())

    def _snapshot(self, now: float) -> Snapshot:
        running, waiting = [], []
        for index, state in self.states.items():
            job = state.job
            if state.phase == "waiting":
                waiting.append(WaitingJob(index, job.submit, job.size, job.estimate, job.priority))
            elif state.phase == "running":
                left = (1.0 - state.progress) * job.runtime_on(state.nodes)
                ratio = job.estimate / job.runtime if job.runtime > 0 else 1.0
                size = JobSize(state.nodes, state.nodes, state.nodes) if state.ignored else job.size
                view = RunningJob(index, state.nodes, size, now + left * ratio, job.priority, state.last_resize)
                running.append(view)
        waiting.sort(key=lambda w: (w.submit, w.job))
        return Snapshot(now, self.nodes, tuple(running), tuple(waiting))

    # act -------------------------------------------------------------------------------------------------------

    def _ask(self, resize: Resize, now: float) -> str:
        state = self.states[resize.job]
        state.signalled = self.port.resize(state.job)
        state.phase, state.target, state.asked = "resizing", resize.nodes, now
        verb = "shrink" if resize.nodes < state.nodes else "expand"
        return f"{state.job.name}: asked to {verb} from {state.nodes} to {resize.nodes} nodes"

    def _act(self, actions: Actions, now: float) -> list[str]:
        acted = [self._ask(resize, now) for resize in actions.shrinks]
        self._deferred = Actions(starts=actions.starts, expands=actions.expands)
        if not actions.shrinks:
            acted += self._act_deferred(now)
        return acted

    def _act_deferred(self, now: float) -> list[str]:
        deferred, self._deferred = self._deferred, None
        acted = []
        for start in deferred.starts if deferred else ():
            state = self.states[start.job]
            if state.phase != "waiting":
                continue
            self.port.submit(state.job, start.nodes)
            state.hold(now, start.nodes)
            state.phase, state.start, state.last_resize = "running", now, now
            acted.append(f"{state.job.name}: started on {start.nodes} nodes")
        for resize in deferred.expands if deferred else ():
            if self.states[resize.job].phase == "running":
                acted.append(self._ask(resize, now))
        return acted

    def _note_busy(self, now: float) -> None:
        used = sum(state.nodes for state in self.states.values() if state.phase in ("running", "resizing"))
        if self.busy[-1][1] != used:
            self.busy.append((now, used))

    def _event(self, line: str) -> None:
        if self.log is not None:
            job, _, what = line.partition(": ")
            self.log.write("malleable", job=job, what=what, t=round(self.now(), 3))
