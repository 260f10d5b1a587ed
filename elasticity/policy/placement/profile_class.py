"""The profile class of an MPI job (the paper's network / CPU / memory intensive), from a profile or the spec.

Our PMPI profile measures the share of each rank's time spent inside MPI; where a byte rate is known too (a
workload that reports it) it counts as well. A job that spends much of its time communicating is network
intensive and is kept in as few workers as possible; anything else keeps the class the spec gives, because a
PMPI trace cannot tell a compute-bound rank from one starved of memory bandwidth.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

ProfileClass = Literal["cpu", "memory", "network"]
PROFILE_CLASSES: tuple[ProfileClass, ...] = ("cpu", "memory", "network")

MPI_FRACTION_NETWORK = 0.30
"""A job whose ranks spend at least this share of their time in MPI calls is network intensive..."""
BYTES_PER_SECOND_NETWORK = 100e6
"""...as is one that moves at least this many bytes per second per rank (when the rate is known)."""


@dataclass(frozen=True)
class CommunicationProfile:
    """What a profile says about a job's communication: mean MPI time fraction, bytes/s per rank if known."""

    mpi_fraction: float
    bytes_per_second: float | None = None

    def __post_init__(self) -> None:
        if not 0.0 <= self.mpi_fraction <= 1.0:
            raise ValueError(f"mpi_fraction must be within [0, 1], got {self.mpi_fraction}")
        if self.bytes_per_second is not None and self.bytes_per_second < 0:
            raise ValueError(f"bytes_per_second must not be negative, got {self.bytes_per_second}")


def is_network_intensive(
    profile: CommunicationProfile,
    mpi_fraction: float = MPI_FRACTION_NETWORK,
    bytes_per_second: float = BYTES_PER_SECOND_NETWORK,
) -> bool:
    """Without a byte rate the MPI time fraction decides. With one, a job moving at least `bytes_per_second` is
    network bound, and one spending `mpi_fraction` in MPI is only if it moves a tenth of that: time waiting in
    MPI without moving data is load imbalance (or a busy machine), not communication."""
    rate = profile.bytes_per_second
    if rate is None:
        return profile.mpi_fraction >= mpi_fraction
    return rate >= bytes_per_second or (profile.mpi_fraction >= mpi_fraction and rate >= bytes_per_second / 10)


def profile_class(declared: ProfileClass, measured: CommunicationProfile | None = None) -> ProfileClass:
    """The measured class where a profile exists (network or not), else the declared one.

    A measured non-network job keeps a declared `memory` (PMPI cannot see bandwidth starvation) and otherwise
    becomes `cpu`: the profile overrides a declared `network` that does not communicate."""
    if measured is None:
        return declared
    if is_network_intensive(measured):
        return "network"
    return "memory" if declared == "memory" else "cpu"


def mpi_fraction_from_duty(duty_cycles: list[float]) -> float:
    """Mean share of time in MPI from the per-rank duty cycles our profiler reports (duty = compute share)."""
    if not duty_cycles:
        raise ValueError("no ranks in the profile")
    return min(1.0, max(0.0, 1.0 - sum(duty_cycles) / len(duty_cycles)))
