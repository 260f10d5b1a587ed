"""Scheduling policies by the names the CLI and the specs use."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import cast

from elasticity.policy.scheduling.easy import easy, fcfs
from elasticity.policy.scheduling.elastic import DEFAULT_RESCALE_GAP, Mode, plan_priority
from elasticity.policy.scheduling.malleable import Strategy, plan_malleable
from elasticity.policy.scheduling.types import Decisions, Snapshot

SchedulingPolicy = Callable[[Snapshot], Decisions]

TRACE_POLICIES = ("fcfs", "easy", "min", "avg", "pref", "keeppref")
PRIORITY_POLICIES = ("elastic", "moldable", "rigid-min", "rigid-max")
POLICIES: tuple[str, ...] = TRACE_POLICIES + PRIORITY_POLICIES
MALLEABLE_POLICIES = frozenset({"min", "avg", "pref", "keeppref", "elastic"})


def policy_named(name: str, *, rescale_gap: float = DEFAULT_RESCALE_GAP) -> SchedulingPolicy:
    """The policy function for ``name``; ValueError naming the choices otherwise."""
    if name == "fcfs":
        return fcfs
    if name == "easy":
        return easy
    if name in ("min", "avg", "pref", "keeppref"):
        return partial(plan_malleable, strategy=cast(Strategy, name))
    if name == "elastic":
        return partial(plan_priority, mode="elastic", rescale_gap=rescale_gap)
    if name in ("moldable", "rigid-min", "rigid-max"):
        return partial(plan_priority, mode=cast(Mode, name))
    raise ValueError(f"unknown policy {name!r} (expected one of {', '.join(POLICIES)})")
