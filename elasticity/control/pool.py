"""A pool of MiniClusters as malleable jobs on one node budget, resized by the scheduling policies themselves.

Each member is a job with [minSize, pref, maxSize] pods and a priority; the pool's budget is the machine. Every
step builds the same :class:`~elasticity.policy.scheduling.types.Snapshot` the simulator builds, calls the same
policy function (``policy_named("elastic")``, ``"min"``, ...), and carries out its decisions through the ports:
a Start creates the member through the Launcher, a Resize scales it through the Actuator. A shrink first drains
the ranks it removes (when the member has a queue port) and is retried on later steps until they are idle, so no
running job is lost; grows and starts wait until the shrinks they depend on are done. It runs on the
:mod:`elasticity.control.loop` shape: observe (the snapshot), plan (the policy), act (drain, scale, start).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from elasticity.control.autoscale import QueuePort
from elasticity.control.events import EventLog
from elasticity.control.loop import StepResult, step
from elasticity.control.ports import Actuator, ActuatorError, Observer
from elasticity.model.speedup import JobSize
from elasticity.policy.scheduling.registry import SchedulingPolicy
from elasticity.policy.scheduling.types import Decisions, RunningJob, Snapshot, WaitingJob


class Launcher(Protocol):
    def launch(self, name: str, size: int) -> None:
        """Create member ``name`` with ``size`` pods."""
        ...


@dataclass(frozen=True)
class Member:
    name: str
    size: JobSize
    priority: int = 1
    submit: float = 0.0


@dataclass(frozen=True)
class PoolSeen:
    """The pool as the policy sees it, and which member each job index is."""

    snapshot: Snapshot
    names: tuple[str, ...]


PoolStep = StepResult[PoolSeen, Decisions, list[str]]
"""``acted``: what was done, in words (also in the event log)."""


@dataclass
class Pool:
    budget: int
    policy: SchedulingPolicy
    observer: Observer
    actuator: Actuator
    launcher: Launcher
    queues: Mapping[str, QueuePort] = field(default_factory=dict)
    clock: Callable[[], float] = time.monotonic
    log: EventLog | None = None
    members: dict[str, Member] = field(default_factory=dict)
    running: dict[str, float] = field(default_factory=dict)
    """Started members and when they were last resized (the elastic policy's rescale gap)."""

    def add(self, member: Member) -> None:
        if member.name in self.members:
            raise ValueError(f"{member.name!r} is already in the pool")
        if member.size.max > self.budget:
            raise ValueError(f"{member.name!r} may grow to {member.size.max} pods; the pool has {self.budget}")
        self.members[member.name] = member

    def remove(self, name: str) -> None:
        """A member that finished: its pods return to the pool."""
        self.members.pop(name, None)
        self.running.pop(name, None)

    def snapshot(self, now: float) -> tuple[Snapshot, list[str]]:
        names = sorted(self.members, key=lambda n: (self.members[n].submit, n))
        running, waiting = [], []
        for index, name in enumerate(names):
            member = self.members[name]
            if name in self.running:
                size = self.observer.observe(name).size
                running.append(RunningJob(index, size, member.size, math.inf, member.priority, self.running[name]))
            else:
                waiting.append(WaitingJob(index, member.submit, member.size, math.inf, member.priority))
        return Snapshot(now, self.budget, tuple(running), tuple(waiting)), names

    def step(self) -> PoolStep:
        """One round: ask the policy, act."""
        return step(self, self.clock)

    def observe(self, now: float) -> PoolSeen:
        snapshot, names = self.snapshot(now)
        return PoolSeen(snapshot, tuple(names))

    def plan(self, seen: PoolSeen, now: float) -> Decisions:
        return self.policy(seen.snapshot)

    def act(self, plan: Decisions, seen: PoolSeen, now: float) -> list[str]:
        names = seen.names
        current = {names[r.job]: r.nodes for r in seen.snapshot.running}
        done: list[str] = []
        pending_shrink = False
        for resize in sorted(plan.resizes, key=lambda r: r.nodes - current[names[r.job]]):
            name = names[resize.job]
            before = current[name]
            if resize.nodes < before:
                if not self._drained(name, resize.nodes, before):
                    pending_shrink = True
                    continue
            elif pending_shrink:
                continue  # its nodes come from a shrink that is still draining
            if self._scale(name, resize.nodes, done):
                self.running[name] = now
        if not pending_shrink:
            for start in plan.starts:
                name = names[start.job]
                self.launcher.launch(name, start.nodes)
                self.running[name] = now
                done.append(f"start {name} at {start.nodes}")
                self._log("start", cluster=name, size=start.nodes)
        return done

    def _drained(self, name: str, size: int, before: int) -> bool:
        queue = self.queues.get(name)
        if queue is None:
            return True
        leaving = frozenset(range(size, before))
        queue.drain(name, leaving)
        busy = queue.queue(name).busy & leaving
        if busy:
            self._log("drain", cluster=name, ranks=sorted(leaving), busy=sorted(busy))
            return False
        return True

    def _scale(self, name: str, size: int, done: list[str]) -> bool:
        try:
            result = self.actuator.scale(name, size)
        except ActuatorError as exc:
            self._log("error", cluster=name, error=str(exc))
            return False
        queue = self.queues.get(name)
        if queue is not None:
            queue.drain(name, frozenset())
        done.append(f"scale {name} {result.previous} -> {result.size}")
        self._log("scaled", cluster=name, previous=result.previous, size=result.size)
        return True

    def _log(self, kind: str, cluster: str = "", **fields: object) -> None:
        if self.log is not None:
            self.log.write(kind, cluster=cluster, **fields)
