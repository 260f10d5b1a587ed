"""Duty cycles from PMPI traces (REFERENCE.md section 6), in pure numpy.

A rank's duty cycle in iteration k is d = t_compute / (t_compute + t_MPI): the share of the
iteration it spends outside the intercepted (blocking) MPI calls. Iteration k ends at the exit of
the k-th boundary call (MPI_Barrier by default; configurable for solvers that never barrier); the
first iteration starts when MPI_Init returns. Time after the last boundary call (teardown) is not
an iteration. MPI time is the union of the intercepted calls' intervals, so nested or concurrent
calls are never counted twice; everything else, including non-blocking MPI calls and I/O, counts as
compute.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from elasticity.profiling.trace import RankTrace

NS = 1e-9
DEFAULT_BOUNDARY_CALL = "MPI_Barrier"
DEFAULT_SKIP_FRACTION = 0.1


def merge_intervals(t_enter: np.ndarray, t_exit: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of intervals [t_enter, t_exit) as sorted, disjoint (starts, ends)."""
    t_enter = np.asarray(t_enter, dtype=np.int64)
    t_exit = np.asarray(t_exit, dtype=np.int64)
    if t_enter.size == 0:
        return t_enter.copy(), t_exit.copy()
    order = np.argsort(t_enter, kind="stable")
    a, b = t_enter[order], t_exit[order]
    reach = np.maximum.accumulate(b)
    new = np.empty(a.size, dtype=bool)
    new[0] = True
    new[1:] = a[1:] > reach[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, a.size - 1)
    return a[first], reach[last]


def busy_time_in_windows(
    t_enter: np.ndarray, t_exit: np.ndarray, win_start: np.ndarray, win_end: np.ndarray
) -> np.ndarray:
    """Length of the union of the call intervals inside each window [win_start, win_end)."""
    starts, ends = merge_intervals(t_enter, t_exit)
    lengths = ends - starts
    before = np.concatenate(([0], np.cumsum(lengths)))

    def covered_until(t: np.ndarray) -> np.ndarray:
        t = np.asarray(t, dtype=np.int64)
        idx = np.searchsorted(starts, t, side="right") - 1
        safe = np.clip(idx, 0, None)
        if starts.size == 0:
            return np.zeros(t.shape, dtype=np.int64)
        partial = np.clip(t - starts[safe], 0, lengths[safe])
        return np.where(idx >= 0, before[safe] + partial, 0)

    covered: np.ndarray = covered_until(win_end) - covered_until(win_start)
    return covered


def duty_cycle(t_compute: np.ndarray, t_mpi: np.ndarray) -> np.ndarray:
    """Element-wise t_compute / (t_compute + t_mpi); NaN where the iteration has no length."""
    t_compute = np.asarray(t_compute, dtype=float)
    total = t_compute + np.asarray(t_mpi, dtype=float)
    out = np.full(total.shape, np.nan)
    np.divide(t_compute, total, out=out, where=total > 0)
    return out


def steady_skip(n_iterations: int, skip_fraction: float) -> int:
    """How many leading iterations the steady state skips (always keeps at least one)."""
    if not 0.0 <= skip_fraction < 1.0:
        raise ValueError(f"skip_fraction must be in [0, 1), got {skip_fraction}")
    return min(math.floor(n_iterations * skip_fraction), max(n_iterations - 1, 0))


def steady_duty_cycle(t_compute: np.ndarray, t_mpi: np.ndarray, skip_fraction: float) -> float:
    """sum t_compute / sum (t_compute + t_mpi) over the iterations after the warm-up."""
    t_compute = np.asarray(t_compute, dtype=float)
    skip = steady_skip(t_compute.size, skip_fraction)
    comp = float(t_compute[skip:].sum())
    total = comp + float(np.asarray(t_mpi, dtype=float)[skip:].sum())
    return comp / total if total > 0 else math.nan


def reclaimable_capacity(duty: np.ndarray | float, allocation: np.ndarray | float) -> np.ndarray:
    """c_i = r_i (1 - d_i): the share of a rank's allocation it spends waiting in MPI."""
    return np.asarray(allocation, dtype=float) * (1.0 - np.asarray(duty, dtype=float))


@dataclass(frozen=True)
class RankDutyCycle:
    """Per-iteration split of one rank's time and its steady-state duty cycle (times in seconds)."""

    rank: int
    hostname: str
    iteration_end: np.ndarray
    t_compute: np.ndarray
    t_mpi: np.ndarray
    duty: np.ndarray
    skipped: int
    steady_duty: float
    steady_compute: float
    steady_mpi: float
    mpi_by_call: dict[str, float] = field(default_factory=dict)

    @property
    def n_iterations(self) -> int:
        """Number of iterations found (boundary calls seen, up to the requested maximum)."""
        return int(self.t_compute.size)


def iteration_windows(
    trace: RankTrace, boundary_call: str = DEFAULT_BOUNDARY_CALL, max_iterations: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(start, end) in ns of each iteration: from MPI_Init's return to each boundary call's exit."""
    ev = trace.events
    try:
        cid = trace.call_id(boundary_call)
    except KeyError as exc:
        raise ValueError(f"{trace.path}: {exc.args[0]}") from None
    ends = np.sort(ev["t_exit"][ev["call"] == cid])
    if ends.size == 0:
        seen = np.bincount(ev["call"], minlength=len(trace.call_names))
        counts = ", ".join(f"{trace.call_names[i]}={int(seen[i])}" for i in np.flatnonzero(seen))
        raise ValueError(
            f"{trace.path}: rank {trace.rank} never called {boundary_call}; choose another boundary "
            f"call (calls seen: {counts or 'none'})"
        )
    if max_iterations is not None:
        ends = ends[:max_iterations]
    starts = np.concatenate(([trace.t_init_end], ends[:-1])).astype(np.int64)
    return starts, ends.astype(np.int64)


def analyze_rank(
    trace: RankTrace,
    boundary_call: str = DEFAULT_BOUNDARY_CALL,
    skip_fraction: float = DEFAULT_SKIP_FRACTION,
    max_iterations: int | None = None,
) -> RankDutyCycle:
    """Duty cycle per iteration and in steady state for one rank."""
    starts, ends = iteration_windows(trace, boundary_call, max_iterations)
    ev = trace.events
    mpi_ns = busy_time_in_windows(ev["t_enter"], ev["t_exit"], starts, ends)
    comp_ns = (ends - starts) - mpi_ns
    t_compute = comp_ns * NS
    t_mpi = mpi_ns * NS
    skip = steady_skip(ends.size, skip_fraction)

    lo, hi = int(starts[skip]), int(ends[-1])
    clipped = np.clip(ev["t_exit"], lo, hi) - np.clip(ev["t_enter"], lo, hi)
    per_call = np.bincount(ev["call"], weights=clipped * NS, minlength=len(trace.call_names))
    by_call = {trace.call_names[i]: float(per_call[i]) for i in np.flatnonzero(per_call > 0)}

    return RankDutyCycle(
        rank=trace.rank,
        hostname=trace.hostname,
        iteration_end=ends,
        t_compute=t_compute,
        t_mpi=t_mpi,
        duty=duty_cycle(t_compute, t_mpi),
        skipped=skip,
        steady_duty=steady_duty_cycle(t_compute, t_mpi, skip_fraction),
        steady_compute=float(t_compute[skip:].sum()),
        steady_mpi=float(t_mpi[skip:].sum()),
        mpi_by_call=by_call,
    )


@dataclass(frozen=True)
class DutyCycleAnalysis:
    """All ranks of one job: duty cycles, current allocation r_i and reclaimable capacity c_i."""

    ranks: tuple[RankDutyCycle, ...]
    boundary_call: str
    skip_fraction: float
    allocation_millicores: np.ndarray
    reclaimable_millicores: np.ndarray

    @property
    def duty(self) -> np.ndarray:
        """Steady-state duty cycle per rank, in rank order."""
        return np.array([r.steady_duty for r in self.ranks])

    @property
    def total_reclaimable_millicores(self) -> float:
        """Sum of c_i over all ranks."""
        return float(self.reclaimable_millicores.sum())

    @property
    def iterations(self) -> tuple[int, ...]:
        """Iterations found per rank (equal for a well-formed SPMD job)."""
        return tuple(r.n_iterations for r in self.ranks)

    @property
    def steady_rate(self) -> float | None:
        """Iterations per second over the steady window, of the slowest rank (the job's pace); None if empty.

        A profile taken while the job ran alone at its equal allocation gives the throughput model's T_1
        reference without timing the job again."""
        rates = []
        for r in self.ranks:
            span = r.steady_compute + r.steady_mpi
            if r.n_iterations - r.skipped < 1 or span <= 0:
                return None
            rates.append((r.n_iterations - r.skipped) / span)
        return min(rates) if rates else None


def analyze_job(
    traces: Sequence[RankTrace],
    boundary_call: str = DEFAULT_BOUNDARY_CALL,
    skip_fraction: float = DEFAULT_SKIP_FRACTION,
    allocation_millicores: float | Sequence[float] | np.ndarray = 1000.0,
    max_iterations: int | None = None,
) -> DutyCycleAnalysis:
    """Analyze every rank; allocation_millicores is r_i, the CPU each rank holds now (scalar or per rank)."""
    ranks = tuple(analyze_rank(t, boundary_call, skip_fraction, max_iterations) for t in traces)
    alloc = np.broadcast_to(np.asarray(allocation_millicores, dtype=float), (len(ranks),)).copy()
    duty = np.array([r.steady_duty for r in ranks])
    return DutyCycleAnalysis(
        ranks=ranks,
        boundary_call=boundary_call,
        skip_fraction=skip_fraction,
        allocation_millicores=alloc,
        reclaimable_millicores=reclaimable_capacity(duty, alloc),
    )
