"""The two ports the multiplexing loop needs beyond `ports.py`: simulations (Flux jobs) and per-job CPU shares.

Pods are resized through `ports.Actuator.resize_many`; what runs inside them goes through these. The CLI binds
them to Flux jobs submitted through the lead broker and to child cgroups on the local backend; tests bind them
to scripted worlds and to the Kubernetes fake.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from elasticity.control.multiplex import SimulationView


@dataclass(frozen=True)
class Submitted:
    """The answer to starting a simulation."""

    ok: bool
    job_id: str = ""
    reason: str = ""


@runtime_checkable
class Simulations(Protocol):
    """Start, observe and cancel simulations (one Flux job each) in one MiniCluster."""

    def submit(self, sim: str, profile_iterations: int) -> Submitted:
        """Start the simulation with the PMPI profiler writing traces after `profile_iterations` iterations."""
        ...

    def observe(self) -> Mapping[str, SimulationView]:
        """Every simulation submitted so far: state, iterations done, the profile once it is complete."""
        ...

    def cancel(self, sim: str, reason: str) -> None:
        """Stop the simulation and release whatever it holds (never raises for one already gone)."""
        ...


@dataclass(frozen=True)
class SharesResult:
    """What became of per-job shares on one pod."""

    pod: int
    applied: bool
    detail: str


@runtime_checkable
class JobShares(Protocol):
    """Inside a pod shared by several simulations, give each one's ranks a CPU weight following its need."""

    level: str
    """"job" (child cgroups per simulation) or "pod" (the runtime offers no delegation: pod level only)."""

    def set_shares(self, shares_m: Mapping[int, Mapping[str, int]]) -> list[SharesResult]: ...
