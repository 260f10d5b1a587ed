"""The operator's campaigns: one CampaignRunner per MiniCluster with a ``spec.campaign``, started once every pod is
ready and stepped every ``interval`` seconds (on the operator's campaign thread).

The runner is the one `minicluster up` runs (one plan for the autoscaler and the multiplexer, acting through the
control ports: the Indexed Job grows and shrinks, pods are resized in place); the caller's ``start`` builds it
(the CLI wires the Kubernetes backend and Flux in the lead pod), so the operator stays free of backends. This
module starts and stops runners as specs change and turns each step into a :class:`Decision`: the ``Campaign``
condition (every ensemble's state and pods, members completed, size, requested CPU) and an Event whenever an
ensemble or member changes state. A failing step is a decision too; a removed campaign is cancelled.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol

from miniclusters.api.campaign import CampaignSpec
from miniclusters.api.fingerprint import fingerprint
from miniclusters.api.spec import MiniCluster
from miniclusters.campaign.progress import CampaignProgress
from miniclusters.operator.loop_types import ClusterKey, Decision
from miniclusters.operator.runners import DEFAULT_INTERVAL, RunnerSupervisor

if TYPE_CHECKING:
    from miniclusters.campaign.runner import CampaignRunner

log = logging.getLogger("miniclusters.operator.campaign")


class CampaignStarter(Protocol):
    def __call__(
        self, namespace: str, mc: MiniCluster, clock: Callable[[], float], resume: CampaignProgress | None = None
    ) -> CampaignRunner:
        """The campaign's runner, its cases prepared (or, resuming, found as the last runner left them); raises
        when it cannot be built."""
        ...


Record = Callable[["ClusterKey", CampaignProgress], bool]
"""Write a campaign's progress where the next operator finds it (status.campaign); False when it could not."""


def summary(runner: CampaignRunner) -> str:
    """The condition's message: each ensemble's state, pods and members done, then the cluster's size and CPU."""
    parts = []
    for e in runner.views:
        done = sum(1 for m in e.members if m.state == "done")
        failed = sum(1 for m in e.members if m.state == "failed")
        where = f" on pods {list(e.pods)}" if e.pods else ""
        parts.append(
            f"{e.name} {e.state}{where} ({done}/{len(e.members)} done" + (f", {failed} failed)" if failed else ")")
        )
    size = runner.last_view.size if runner.last_view is not None else "?"
    return (
        "; ".join(parts) + f"; size {size}, requested {runner._last_requested}m, {runner.resizes} resizes, "
        f"{runner.scale_events} scale events"
    )


def members_done(runner: CampaignRunner) -> tuple[int, int]:
    members = [m for e in runner.views for m in e.members]
    return sum(1 for m in members if m.state == "done"), len(runner.plan.members)


@dataclass
class CampaignLoop:
    spec: CampaignSpec
    runner: CampaignRunner
    due: float
    recorded: CampaignProgress | None = None
    """The progress last written to status.campaign."""
    states: dict[str, str] = field(default_factory=dict)
    """Ensemble and member states already turned into Events."""
    outcome: Literal["done", "cancelled"] | None = None
    last: Decision | None = None

    @property
    def finished(self) -> bool:
        return self.outcome is not None

    def step(self, now: float, interval: float) -> tuple[list[Decision], Decision]:
        """One runner step: (an Event per ensemble/member that changed state, the condition's decision)."""
        self.due = now + interval
        try:
            self.runner.step()
            over = self.runner.over()
        except Exception as exc:  # a lead that does not answer, an API error: say so, try again next interval
            message = str(exc) or type(exc).__name__
            repeated = self.last is not None and self.last.condition == (False, "LoopFailed", message)
            return [], Decision(False, "LoopFailed", message, None if repeated else "Warning")
        changes = self._changes()
        if over:
            self.outcome = "done"
            self.runner.log.close()
            ok, total = members_done(self.runner)
            reason = "Done" if ok == total else "DoneWithFailures"
            return changes, Decision(ok == total, reason, f"{ok}/{total} members completed: {summary(self.runner)}")
        return changes, Decision(True, "Running", summary(self.runner))

    def _changes(self) -> list[Decision]:
        out = []
        for e in self.runner.views:
            if self.states.get(e.name) != e.state:
                self.states[e.name] = e.state
                where = f" on pods {list(e.pods)}" if e.pods else ""
                reason = f"Ensemble{e.state.capitalize()}"
                out.append(Decision(True, reason, f"ensemble {e.name} {e.state}{where}", "Normal"))
            for m in e.members:
                key = f"{e.name}/{m.name}"
                if m.state in ("done", "failed") and self.states.get(key) != m.state:
                    self.states[key] = m.state
                    word: Literal["Normal", "Warning"] = "Normal" if m.state == "done" else "Warning"
                    out.append(
                        Decision(m.state == "done", f"Member{m.state.capitalize()}", f"member {m.name} {m.state}", word)
                    )
        return out


class CampaignSupervisor(RunnerSupervisor[CampaignLoop, CampaignStarter]):
    """Starts, steps and stops the campaigns' runners (runners.RunnerSupervisor); records each one's progress
    through ``record`` so that a campaign outlives the operator running it."""

    def __init__(
        self,
        start: CampaignStarter,
        clock: Callable[[], float],
        report: Callable[[ClusterKey, Decision, bool], None],
        record: Record,
        interval: float = DEFAULT_INTERVAL,
    ) -> None:
        super().__init__(start, clock, report, interval)
        self.record = record
        self.failed_spec: dict[ClusterKey, CampaignSpec] = {}
        """The spec.campaign that last could not start, by cluster."""

    def sync(
        self,
        key: ClusterKey,
        mc: MiniCluster | None,
        ready: bool = True,
        gone: bool = False,
        recorded: CampaignProgress | None = None,
    ) -> None:
        """Start the campaign of ``key`` once every pod is ready; cancel it when its spec.campaign goes or changes.
        A finished campaign stays finished (its condition says how it ended) until its spec changes. ``recorded``:
        the progress in the cluster's status; a record of this spec is resumed (ended: left alone)."""
        running = self.loops.get(key)
        wanted = mc.spec.campaign if mc is not None else None
        if running is not None and wanted == running.spec:
            return
        if running is not None:
            del self.loops[key]
            if running.outcome is None:
                self._stop(key, running, gone)
        if wanted is None:
            self.failed.pop(key, None)
            self.retry_at.pop(key, None)
            return
        if self.failed_spec.get(key) != wanted:
            self.retry_at.pop(key, None)  # another spec than the one that failed: try it at once
        if not self._may_start(key):
            return
        resume = recorded if recorded is not None and recorded.belongs_to(wanted) else None
        if resume is not None and resume.outcome is not None:
            return  # it ended under an earlier operator: its condition already says how
        if mc is not None and ready:
            self._start(key, mc, wanted, resume)

    def _start(self, key: ClusterKey, mc: MiniCluster, spec: CampaignSpec, resume: CampaignProgress | None) -> None:
        try:
            runner = self.start(key.namespace, mc, self.clock, resume)
            if resume is None:
                runner.begin()
            else:
                runner.resume(resume)
        except Exception as exc:
            self.failed_spec[key] = spec
            verb = "resume" if resume is not None else "start"
            self._start_failed(key, f"could not {verb} the campaign: {exc}")
            return
        loop = CampaignLoop(spec, runner, due=self.clock(), recorded=resume)
        members = len(runner.plan.members)
        where = f"{len(runner.plan.ensembles)} ensembles, {members} members in {runner.plan.workdir}"
        if resume is None:
            message = f"every {self.interval:g}s: {where}"
        else:
            loop.states = seen_states(runner)
            ended = sorted(n for n, s in loop.states.items() if "/" not in n and s in ("done", "cancelled"))
            message = (
                f"resumed: {len(runner.jobs)} of {len(runner.plan.ensembles)} ensembles submitted earlier"
                + (f" ({', '.join(ended)} ended)" if ended else "")
                + f"; every {self.interval:g}s: {where}"
            )
        self._save(key, loop)
        self._started(key, loop, message)

    def _save(self, key: ClusterKey, loop: CampaignLoop) -> None:
        """Record the runner's progress when it changed (a write that fails is tried again after the next step)."""
        progress = loop.runner.progress(fingerprint(loop.spec))
        if progress != loop.recorded and self.record(key, progress):
            loop.recorded = progress

    def _stop(self, key: ClusterKey, loop: CampaignLoop, gone: bool) -> None:
        """A removed campaign is cancelled (its sub-instances and members with it); a deleted cluster's pods go
        with it, so there is nothing to cancel there, only the event log to close."""
        why = "the MiniCluster was deleted" if gone else "spec.campaign was removed or changed"
        try:
            if not gone:
                loop.runner.cancel(why)
        except Exception as exc:
            log.warning("%s: could not cancel its campaign: %s", key, exc)
        finally:
            if not gone:
                self._save(key, loop)
            with contextlib.suppress(Exception):
                loop.runner.log.close()
        if not gone:
            self.report(key, Decision(False, "Cancelled", why, "Warning"), True)

    def step_due(self) -> int:
        """Step every unfinished runner whose interval has passed; returns how many stepped."""
        stepped = 0
        for key, loop in list(self.loops.items()):
            now = self.clock()
            if loop.finished or loop.due > now:
                continue
            changes, condition = loop.step(now, self.interval)
            stepped += 1
            self._save(key, loop)
            self._report_step(key, loop, changes, condition)
        return stepped


def seen_states(runner: CampaignRunner) -> dict[str, str]:
    """What a resumed runner's predecessor already reported as Events (its ensembles' states, its members that
    ended): the runner's states replayed from its event log."""
    out = {}
    for key, state in runner._states.items():
        if "/" not in key:
            out[key] = state
        elif state.removesuffix("+profiled") in ("done", "failed"):
            out[key] = state.removesuffix("+profiled")
    return out
