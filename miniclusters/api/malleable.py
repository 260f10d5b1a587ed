"""spec.malleable: a trace's jobs run live as malleable Flux jobs in this MiniCluster (a miniclusters extension;
off when absent). The MiniCluster's `size` is the nodes the jobs share; the policy is one the simulator runs
(`minicluster simulate`), so a live run and its prediction differ only in who carries the decisions out."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from miniclusters.api.spec_base import SpecModel

LIVE_POLICIES = ("fcfs", "easy", "min", "avg", "pref", "keeppref", "elastic")
"""Scheduling policies (elasticity/policy/scheduling) that run live: the rigid baselines and the malleable ones."""


class MalleableRunSpec(SpecModel):
    """Which jobs, how they are scaled to minutes, and which policy starts and resizes them."""

    trace: Literal["sdsc", "hpc2n", "nasa", "lublin"] = "sdsc"
    """A shared trace (../shared/traces, or $MINICLUSTER_TRACES)."""
    jobs: int = Field(default=16, ge=1, le=256, strict=True)
    """How many consecutive jobs of the trace run."""
    first: int = Field(default=0, ge=0, strict=True)
    """The first of them (0: the trace's first usable job)."""
    policy: Literal["fcfs", "easy", "min", "avg", "pref", "keeppref", "elastic"] = "keeppref"
    malleable_percent: float = Field(default=100.0, ge=0.0, le=100.0)
    """Share of the jobs made malleable (seeded), the others rigid at their size."""
    seed: int = Field(default=1, ge=0, strict=True)
    arrivals: float = Field(default=60.0, ge=0.0, le=86400.0)
    """Seconds within which the jobs arrive (the trace's arrivals, compressed)."""
    median_runtime: float = Field(default=40.0, ge=1.0, le=86400.0)
    """Run times are scaled so their median is this many seconds..."""
    runtime_min: float = Field(default=10.0, ge=1.0, le=86400.0)
    runtime_max: float = Field(default=120.0, ge=1.0, le=86400.0)
    """...and clipped to [runtimeMin, runtimeMax]."""
    iterations: int = Field(default=400, ge=10, le=1_000_000, strict=True)
    """Jacobi iterations per job (each job solves its own grid; resizes happen between iterations)."""
    resize_timeout: float = Field(default=30.0, ge=1.0, le=3600.0)
    """Seconds a job has to checkpoint when asked to resize; past them it keeps its size."""
    workdir: str = ""
    """Where the jobs' checkpoints, answers and output go (default: a directory in the state directory)."""
