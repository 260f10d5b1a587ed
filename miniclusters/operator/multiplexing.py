"""The operator's multiplexing controllers: one MultiplexRunner per MiniCluster whose ``spec.multiplexing.enabled``
is true and whose pods are all ready, stepped every ``interval`` seconds (on the operator's multiplex thread).

The planner, the runner and the ports are the ones `minicluster multiplex` runs; the caller's ``start`` builds a
cluster's runner (the CLI wires the Kubernetes backend's ports, Flux jobs through exec in the lead, the lead's
copy of the event log), so the operator stays free of the CLI's backend. This module only starts and stops
runners as specs change and turns what each step did into a :class:`Decision`: the ``Multiplexing`` condition
(phase, simulations, requested CPU) and an Event for the planner's notable events (a simulation started,
profiled, done, failed, cancelled, timed out or retried; a resize, a refused resize, a pod restart). A failing
step is a decision too.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol

from elasticity.control.multiplex_runner import MultiplexRunner, Progress
from miniclusters.api.extension_specs import MultiplexingSpec
from miniclusters.api.fingerprint import fingerprint
from miniclusters.api.spec import MiniCluster
from miniclusters.operator.loop_types import ClusterKey, Decision
from miniclusters.operator.multiplex_progress import MultiplexProgress, Outcome, RunRecord
from miniclusters.operator.runners import DEFAULT_INTERVAL, RunnerSupervisor

log = logging.getLogger("miniclusters.operator.multiplexing")


@dataclass
class StartedLoop:
    """What ``start`` returns for one cluster: its runner and how to push its new events to the lead's copy."""

    runner: MultiplexRunner
    flush: Callable[[], None] = lambda: None
    note: str = ""
    """Said once in the Started event (e.g. "pod level only: ...")."""
    record: Callable[[], RunRecord] | None = None
    """The run as the next controller needs it (None: the simulations cannot hand it over)."""


class MultiplexStarter(Protocol):
    def __call__(
        self, namespace: str, mc: MiniCluster, clock: Callable[[], float], resume: MultiplexProgress | None = None
    ) -> StartedLoop:
        """The loop for the cluster's spec.multiplexing (going on with ``resume``'s run); raises when it cannot
        be built."""
        ...


Record = Callable[["ClusterKey", MultiplexProgress], bool]
"""Write a run's progress where the next operator finds it (status.multiplexing); False when it could not."""

EventWord = tuple[str, Literal["Normal", "Warning"]]
NOTABLE: dict[str, EventWord] = {
    "submitted": ("SimulationStarted", "Normal"),
    "profiled": ("Profiled", "Normal"),
    "resize": ("Resized", "Normal"),
    "refit": ("ModelRefit", "Normal"),
    "done": ("SimulationFinished", "Normal"),
    "resize-deferred": ("ResizeDeferred", "Warning"),
    "plan-shrunk": ("PlanShrunk", "Warning"),
    "failed": ("SimulationFailed", "Warning"),
    "cancelled": ("SimulationCancelled", "Warning"),
    "timeout": ("SimulationTimedOut", "Warning"),
    "retry": ("SimulationRetried", "Warning"),
    "pod-restart": ("PodRestarted", "Warning"),
    "pod-down": ("PodDown", "Warning"),
    "controller-stop": ("Stopped", "Warning"),
}
PHASE_REASONS = {
    "profile": "Profiling",
    "resize": "Resizing",
    "pack": "Packing",
    "fairness": "Balancing",
    "watch": "Watching",
    "done": "Done",
}


# open: an event line of the multiplexing runner (elasticity), its fields by kind
def event_decision(event: dict[str, object]) -> Decision | None:
    """The Event for one planner event, None for the routine ones (samples, job shares, starts queued)."""
    kind = str(event.get("event"))
    if kind == "resize-answer":
        if event.get("answer") != "infeasible":
            return None
        word: EventWord | None = ("ResizeInfeasible", "Warning")
    else:
        word = NOTABLE.get(kind)
    if word is None:
        return None
    details = ", ".join(f"{k} {v}" for k, v in event.items() if k not in ("t", "event"))
    return Decision(word[1] == "Normal", word[0], f"{kind} at {event.get('t')}s: {details}".rstrip(": "), word[1])


def progress_decision(progress: Progress, last: Decision | None = None) -> Decision:
    """The condition: phase, simulations, requested CPU, beta, and the last notable event."""
    beta = f", beta {progress.beta:.3f}" if progress.beta is not None else ""
    return Decision(
        True,
        PHASE_REASONS.get(progress.phase, progress.phase.capitalize()),
        f"phase {progress.phase}: {progress.running} running, {progress.finished} finished, "
        f"requested {progress.requested_m}m{beta}" + (f"; last event: {last.message}" if last else ""),
    )


@dataclass
class ClusterLoop:
    spec: MultiplexingSpec
    started: StartedLoop
    due: float
    last: Decision | None = None
    done: bool = False
    last_notable: Decision | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    """Held for a step and for stopping: a stopped runner never submits after its simulations were cancelled."""
    stopped: bool = False
    started_wall: float = 0.0
    recorded: MultiplexProgress | None = None
    """The progress last written to status.multiplexing."""

    def progress(self, outcome: Outcome | None = None) -> MultiplexProgress | None:
        if self.started.record is None:
            return None
        return MultiplexProgress(fingerprint(self.spec), self.started.record(), self.started_wall, outcome)

    @property
    def finished(self) -> bool:
        return self.done

    @property
    def runner(self) -> MultiplexRunner:
        return self.started.runner

    def step(self, now: float, interval: float) -> tuple[list[Decision], Decision]:
        """One runner step: (an Event for each notable planner event, the condition's decision)."""
        self.due = now + interval
        try:
            result = self.runner.step()
        except Exception as exc:  # a lead that does not answer, an API error: say so, try again next interval
            message = str(exc) or type(exc).__name__
            repeated = self.last is not None and self.last.condition == (False, "LoopFailed", message)
            return [], Decision(False, "LoopFailed", message, None if repeated else "Warning")
        with contextlib.suppress(Exception):  # the lead's copy is best effort: the Events carry the same
            self.started.flush()
        progress = result.acted.progress
        notable = [d for e in result.acted.events for d in [event_decision(e)] if d is not None]
        self.done = progress.phase == "done"
        if notable:
            self.last_notable = notable[-1]
        return notable, progress_decision(progress, self.last_notable)


class MultiplexSupervisor(RunnerSupervisor[ClusterLoop, MultiplexStarter]):
    """Starts, steps and stops the multiplexing runners (runners.RunnerSupervisor): Events of notable planner
    events leave the condition alone. Each run's progress goes through ``record`` (status.multiplexing), so a
    run outlives the operator running it."""

    def __init__(
        self,
        start: MultiplexStarter,
        clock: Callable[[], float],
        report: Callable[[ClusterKey, Decision, bool], None],
        record: Record | None = None,
        interval: float = DEFAULT_INTERVAL,
        wall: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(start, clock, report, interval)
        self.record = record
        self.wall = wall

    def sync(
        self,
        key: ClusterKey,
        mc: MiniCluster | None,
        ready: bool = True,
        gone: bool = False,
        recorded: MultiplexProgress | None = None,
    ) -> None:
        """Make the runner of ``key`` match its spec: start it (once every pod is ready), or stop it. A changed
        spec restarts it: the planner's knobs are fixed for a run. ``recorded``: the progress in the cluster's
        status; the run of this spec it names is gone on with (ended: left alone)."""
        running = self.loops.get(key)
        spec = mc.spec.multiplexing if mc is not None else None
        wanted = spec if spec is not None and spec.enabled else None
        if running is not None and wanted == running.spec:
            return
        if running is not None:
            del self.loops[key]
            with running.lock:
                running.stopped = True
                if not gone:  # a deleted cluster's pods go too: nothing to cancel
                    self._cancel_running(key, running)
                    self._save(key, running, "cancelled")
            if not gone and wanted is None:
                why = "spec.multiplexing.enabled is false" if spec is not None else "the spec is invalid"
                self.report(key, Decision(False, "Disabled", why, "Normal"), True)
        if wanted is None:
            self.failed.pop(key, None)
            return
        resume = recorded if recorded is not None and recorded.belongs_to(wanted) else None
        if resume is not None and resume.outcome is not None:
            return  # it ended under an earlier operator: its condition already says how
        if mc is not None and ready:
            self._start(key, mc, wanted, resume)

    def _start(
        self, key: ClusterKey, mc: MiniCluster, spec: MultiplexingSpec, resume: MultiplexProgress | None
    ) -> None:
        try:
            started = self.start(key.namespace, mc, self.clock, resume)
        except Exception as exc:
            verb = "go on with" if resume is not None else "start"
            self._start_failed(key, f"could not {verb} the controller: {exc}")
            return
        config = started.runner.planner.config
        message = (
            f"every {self.interval:g}s: {spec.command!r}, {config.ranks} ranks on {len(config.pods)} pods, up to "
            f"{config.max_simulations} at once ({config.total} in all)" + (f"; {started.note}" if started.note else "")
        )
        loop = ClusterLoop(spec, started, due=self.clock(), recorded=resume)
        loop.started_wall = resume.started if resume is not None else self.wall()
        self._save(key, loop)
        self._started(key, loop, message)

    def _save(self, key: ClusterKey, loop: ClusterLoop, outcome: Outcome | None = None) -> None:
        """Record the run's progress when it changed (a write that fails is tried again after the next step)."""
        if self.record is None:
            return
        progress = loop.progress(outcome)
        if progress is not None and progress != loop.recorded and self.record(key, progress):
            loop.recorded = progress

    @staticmethod
    def _cancel_running(key: ClusterKey, loop: ClusterLoop) -> None:
        """A stopped controller's simulations would run on with nobody minding their CPU: cancel them (each ends
        cancelled in the planner's events, so the lead's log and timeline close)."""
        try:
            loop.runner.stop("cancelled", "the multiplexing controller was stopped")
            loop.started.flush()
        except Exception as exc:
            log.warning("%s: could not cancel its simulations: %s", key, exc)

    def step_due(self) -> int:
        """Step every unfinished runner whose interval has passed; returns how many stepped."""
        stepped = 0
        for key, loop in list(self.loops.items()):
            now = self.clock()
            if loop.finished or loop.due > now:
                continue
            with loop.lock:
                if loop.stopped:
                    continue
                notable, condition = loop.step(now, self.interval)
            stepped += 1
            if self.loops.get(key) is not loop:
                continue  # stopped while it stepped: its last word was "Disabled"
            self._save(key, loop, "done" if loop.done else None)
            self._report_step(key, loop, notable, condition)
        return stepped
