"""The operator's autoscalers: one :class:`elasticity.control.autoscale.Autoscaler` per MiniCluster whose
``spec.autoscale.enabled`` is true, stepped every ``intervalSeconds`` (on the operator's autoscale thread).

The plan, the loop and the ports are the ones `minicluster autoscale` runs; this module only starts and stops
loops as specs change and turns each step into a :class:`Decision` (an ``Autoscaling`` condition and, for
actions and failures, an Event). The ports are made by the caller (the CLI wires the Kubernetes backend's
actuator, the one writer of a cluster's size, and the lead's queue over exec), so the operator stays free of
the CLI's backend. A failing step is a decision too: it never leaves this module as an exception.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from elasticity.control.autoscale import Autoscaler, QueuePort
from elasticity.control.ports import Actuator, Observer
from elasticity.policy.autoscale import AutoscaleOptions
from miniclusters.api.extension_specs import AutoscaleSpec
from miniclusters.operator.loop_types import ClusterKey, Decision

log = logging.getLogger("miniclusters.operator.autoscaling")


@dataclass(frozen=True)
class AutoscalePorts:
    """What one cluster's loop reads and acts through."""

    observer: Observer
    actuator: Actuator
    queue: QueuePort


PortsFor = Callable[[str], AutoscalePorts]
"""namespace -> the ports acting on MiniClusters in that namespace."""


def options_of(spec: AutoscaleSpec) -> AutoscaleOptions:
    return AutoscaleOptions(
        idle_seconds=float(spec.idle_seconds),
        cooldown_seconds=float(spec.cooldown_seconds),
        policy="fcfs" if spec.policy == "fcfs" else "easy",
    )


@dataclass
class ClusterLoop:
    """One cluster's autoscaler and when it next steps."""

    name: str
    spec: AutoscaleSpec
    scaler: Autoscaler
    ports: AutoscalePorts
    due: float
    last: Decision | None = field(default=None)

    def step(self, now: float) -> Decision:
        self.due = now + self.spec.interval_seconds
        try:
            result = self.scaler.step()
        except Exception as exc:  # a broken queue or API: say so on the cluster, try again next interval
            message = str(exc) or type(exc).__name__
            repeated = self.last is not None and self.last.condition == (False, "LoopFailed", message)
            return Decision(False, "LoopFailed", message, None if repeated else "Warning")
        plan, acted = result.plan, result.acted
        if acted.error:
            return Decision(False, "ScaleFailed", f"scaling to {plan.size} failed: {acted.error}", "Warning")
        if acted.scaled is not None:
            grew = acted.scaled.size > acted.scaled.previous
            message = f"{acted.scaled.previous} -> {acted.scaled.size} pods: {plan.reason}"
            return Decision(True, "ScaledUp" if grew else "ScaledDown", message, "Normal")
        if acted.drained:
            ranks = ",".join(str(r) for r in sorted(acted.drained))
            return Decision(True, "Draining", f"ranks {ranks} take no new jobs: {plan.reason}", "Normal")
        return Decision(True, "Steady", f"{result.seen.view.size} pods; the queue asks for {plan.wanted}")


class AutoscaleSupervisor:
    """Starts, steps and stops the loops; every decision goes to ``report`` (which never raises)."""

    def __init__(
        self,
        ports_for: PortsFor,
        clock: Callable[[], float],
        report: Callable[[ClusterKey, Decision], None],
    ) -> None:
        self.ports_for = ports_for
        self.clock = clock
        self.report = report
        self.loops: dict[ClusterKey, ClusterLoop] = {}

    def sync(self, key: ClusterKey, spec: AutoscaleSpec | None, gone: bool = False) -> None:
        """Make the loop of ``key`` match its spec: start it, restart it with new settings, or stop it."""
        running = self.loops.get(key)
        wanted = spec if spec is not None and spec.enabled else None
        if running is not None and wanted == running.spec:
            return
        if running is not None:
            del self.loops[key]
            if not gone:  # a deleted cluster's lead is going too: nothing to undrain or report
                self._undrain(key, running)
                if wanted is None:
                    why = (
                        "spec.autoscale.enabled is false"
                        if spec is not None
                        else "the spec is invalid; see InvalidSpec"
                    )
                    self.report(key, Decision(False, "Disabled", why, "Normal"))
        if wanted is not None:
            self._start(key, wanted)

    def _start(self, key: ClusterKey, spec: AutoscaleSpec) -> None:
        try:
            ports = self.ports_for(key.namespace)
        except Exception as exc:
            self.report(key, Decision(False, "LoopFailed", f"could not start the autoscaler: {exc}", "Warning"))
            return
        scaler = Autoscaler(key.name, ports.observer, ports.actuator, ports.queue, options_of(spec), clock=self.clock)
        self.loops[key] = ClusterLoop(key.name, spec, scaler, ports, due=self.clock())
        self.report(
            key,
            Decision(
                True,
                "Started",
                f"every {spec.interval_seconds:g}s, idle {spec.idle_seconds}s, cool-down {spec.cooldown_seconds}s, "
                f"policy {spec.policy}",
                "Normal",
            ),
        )

    def _undrain(self, key: ClusterKey, loop: ClusterLoop) -> None:
        """Give a stopped loop's drained ranks back to the queue (the cluster stays at its size); best effort."""
        if loop.scaler.draining:
            try:
                loop.ports.queue.drain(key.name, frozenset())
            except Exception as exc:
                log.warning("%s: could not undrain ranks when stopping the autoscaler: %s", key, exc)

    def step_due(self) -> int:
        """Step every loop whose interval has passed; returns how many stepped."""
        stepped = 0
        for key, loop in list(self.loops.items()):
            now = self.clock()
            if loop.due > now:
                continue
            decision = loop.step(now)
            stepped += 1
            if self.loops.get(key) is not loop:
                continue  # stopped (disabled or deleted) while it stepped: its last word was "Disabled"
            changed = loop.last is None or loop.last.condition != decision.condition
            loop.last = decision
            if changed or decision.event_type is not None:
                self.report(key, decision)
        return stepped

    def next_due(self) -> float | None:
        return min((loop.due for loop in self.loops.values()), default=None)
