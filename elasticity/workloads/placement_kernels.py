"""The placement kernels (placement_kernels.c): one small MPI program per profile class, and their reports.

`dgemm` is CPU bound, `triad` memory bound, `ring` network bound. Each rank reports its own context switches
and CPU migrations during the timed loop (from /proc/self/status and /proc/self/sched); rank 0 prints them as one
JSON line, read back by `parse_report`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from elasticity.pmpi.build import compile_with_mpicc
from elasticity.policy.placement import CommunicationProfile, ProfileClass

SOURCE = Path(__file__).with_name("placement_kernels.c")
PROGRAM = "placement_kernels"
CFLAGS = ("-O2", "-Wall", "-Wextra", "-Werror")

Kernel = Literal["dgemm", "triad", "ring"]
DECLARED_CLASS: dict[Kernel, ProfileClass] = {"dgemm": "cpu", "triad": "memory", "ring": "network"}


def build_placement_kernels(output_dir: Path | str | None = None, mpicc: str = "mpicc", force: bool = False) -> Path:
    """Compile the kernels with the installed MPI wrapper (cached like the profiler library)."""
    return compile_with_mpicc(SOURCE, PROGRAM, CFLAGS, (), output_dir, mpicc, force)


@dataclass(frozen=True)
class RankReport:
    rank: int
    host: str
    seconds: float
    mpi_seconds: float
    bytes_sent: float
    voluntary_ctxt_switches: int
    nonvoluntary_ctxt_switches: int
    migrations: int
    cpus: str = ""
    """The rank's Cpus_allowed_list: one core when pinned per rank."""
    broker_cpu_ms: float = -1.0
    """CPU time its pod's broker used during the timed loop (-1: broker not found among its ancestors)."""

    @property
    def ctx_switches(self) -> int:
        return self.voluntary_ctxt_switches + self.nonvoluntary_ctxt_switches


@dataclass(frozen=True)
class KernelReport:
    kind: Kernel
    ranks: tuple[RankReport, ...]

    @property
    def seconds(self) -> float:
        return max(r.seconds for r in self.ranks)

    def communication(self) -> CommunicationProfile:
        """Mean MPI time fraction and bytes/s per rank: what the placement policy classifies by."""
        fraction = sum(r.mpi_seconds / r.seconds for r in self.ranks if r.seconds > 0) / len(self.ranks)
        rate = sum(r.bytes_sent / r.seconds for r in self.ranks if r.seconds > 0) / len(self.ranks)
        return CommunicationProfile(min(1.0, max(0.0, fraction)), rate)


def parse_report(stdout: str) -> KernelReport:
    """The kernel's JSON line (the last line starting with `{"kind"`); ValueError if there is none."""
    lines = [line for line in stdout.splitlines() if line.startswith('{"kind"')]
    if not lines:
        raise ValueError(f"no kernel report in the output: {stdout[-300:]!r}")
    data = json.loads(lines[-1])
    ranks = tuple(RankReport(**{k: v for k, v in r.items()}) for r in data["per_rank"])
    return KernelReport(data["kind"], ranks)
