"""One scheduling pass, checked: the policy's decisions on a snapshot as the shrinks, starts and expands to carry
out, in that order. The simulator (elasticity/sim/engine.py) and the live malleable loop
(elasticity/control/malleable.py) both plan through `plan_pass`, so they differ only in how they carry the
actions out. A decision that breaks a rule (unknown job, size outside its range, more nodes than the machine
has) is a policy bug: PolicyError, never silently repaired.
"""

from __future__ import annotations

from dataclasses import dataclass

from elasticity.errors import ElasticityError
from elasticity.policy.scheduling.registry import SchedulingPolicy
from elasticity.policy.scheduling.types import Decisions, Resize, Snapshot, Start


class PolicyError(ElasticityError, RuntimeError):
    pass


@dataclass(frozen=True, slots=True)
class Actions:
    shrinks: tuple[Resize, ...] = ()
    """First: they free the nodes the starts and expands may need."""
    starts: tuple[Start, ...] = ()
    expands: tuple[Resize, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.shrinks or self.starts or self.expands)


def checked(snapshot: Snapshot, decisions: Decisions, policy_name: str = "policy") -> Actions:
    """The decisions as ordered actions; PolicyError naming the first that breaks a rule."""
    running = {run.job: run for run in snapshot.running}
    waiting = {wait.job: wait for wait in snapshot.waiting}
    used = snapshot.nodes - snapshot.free
    shrinks: list[Resize] = []
    expands: list[Resize] = []
    for resize in decisions.resizes:
        view = running.get(resize.job)
        if view is None or not view.size.min <= resize.nodes <= view.size.max:
            raise PolicyError(f"{policy_name}: invalid resize {resize} at t={snapshot.now}")
        if resize.nodes != view.nodes:
            (shrinks if resize.nodes < view.nodes else expands).append(resize)
            used += resize.nodes - view.nodes
    started = set()
    for start in decisions.starts:
        wait = waiting.get(start.job)
        if wait is None or start.job in started or not wait.size.min <= start.nodes <= wait.size.max:
            raise PolicyError(f"{policy_name}: invalid start {start} at t={snapshot.now}")
        started.add(start.job)
        used += start.nodes
    if used > snapshot.nodes:
        raise PolicyError(f"{policy_name}: decisions at t={snapshot.now} use {used} of {snapshot.nodes} nodes")
    return Actions(tuple(shrinks), decisions.starts, tuple(expands))


def plan_pass(policy: SchedulingPolicy, snapshot: Snapshot, policy_name: str = "policy") -> Actions:
    """Ask the policy once and check its answer: the one decision path of the simulator and the live loop."""
    return checked(snapshot, policy(snapshot), policy_name)
