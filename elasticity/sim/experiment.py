"""Runs of policies x malleable shares x seeds, reduced to one row per (policy, share): means and IQRs.

Policies that ignore malleability (fcfs, easy) give the same schedule for every share and seed, so they are
simulated once and that result stands for every seed (their IQR is 0).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from elasticity.policy.scheduling.registry import MALLEABLE_POLICIES, policy_named
from elasticity.sim.engine import SimResult, simulate
from elasticity.sim.jacobi import jacobi_mix
from elasticity.sim.metrics import METRICS, summarize
from elasticity.sim.workload import Workload, with_malleable

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Run:
    policy: str
    malleable: float
    seed: int
    result: SimResult
    metrics: dict[str, float]


@dataclass(frozen=True)
class Row:
    policy: str
    malleable: float
    mean: dict[str, float]
    iqr: dict[str, float]

    def as_json(self) -> dict[str, str | float | dict[str, float]]:
        """policy, malleable share, each metric's mean (jobs as a whole number) and the IQRs under `iqr`."""
        row: dict[str, str | float | dict[str, float]] = {"policy": self.policy, "malleable": self.malleable}
        row.update({name: self.mean[name] for name in METRICS})
        row["jobs"] = int(self.mean["jobs"])
        row["iqr"] = {name: self.iqr[name] for name in METRICS if name != "jobs"}
        return row


def reduce(runs: Sequence[Run]) -> list[Row]:
    groups: dict[tuple[str, float], list[Run]] = {}
    for run in runs:
        groups.setdefault((run.policy, run.malleable), []).append(run)
    rows = []
    for (policy, share), group in groups.items():
        mean, iqr = {}, {}
        for name in METRICS:
            values = np.array([run.metrics[name] for run in group])
            mean[name] = float(values.mean())
            q1, q3 = np.percentile(values, [25, 75])
            iqr[name] = float(q3 - q1)
        rows.append(Row(policy, share, mean, iqr))
    return rows


def run_trace(
    base: Workload,
    policies: Sequence[str],
    shares: Sequence[float],
    seeds: int,
    *,
    rescale_overhead: float = 0.0,
    progress: Progress | None = None,
) -> list[Run]:
    runs: list[Run] = []
    fixed: dict[str, tuple[SimResult, dict[str, float]]] = {}
    for share in shares:
        for seed in range(seeds):
            workload = with_malleable(base, share, seed) if any(p in MALLEABLE_POLICIES for p in policies) else base
            for policy in policies:
                if policy not in MALLEABLE_POLICIES:
                    if policy not in fixed:
                        result = simulate(base, policy_named(policy), policy_name=policy)
                        fixed[policy] = (result, summarize(result))
                    result, metrics = fixed[policy]
                else:
                    result = simulate(
                        workload, policy_named(policy), policy_name=policy, rescale_overhead=rescale_overhead
                    )
                    metrics = summarize(result)
                runs.append(Run(policy, share, seed, result, metrics))
                if progress:
                    progress(f"{base.name} {policy} {share:g}% seed {seed}")
    return runs


def run_jacobi(
    jobs: int,
    gap: float,
    policies: Sequence[str],
    seeds: int,
    *,
    slots: int,
    rescale_gap: float,
    rescale_overhead: float = 0.0,
    progress: Progress | None = None,
) -> list[Run]:
    runs = []
    for seed in range(seeds):
        workload = jacobi_mix(jobs, gap, seed, slots)
        for policy in policies:
            result = simulate(
                workload,
                policy_named(policy, rescale_gap=rescale_gap),
                policy_name=policy,
                rescale_overhead=rescale_overhead,
            )
            runs.append(Run(policy, 100.0, seed, result, summarize(result)))
            if progress:
                progress(f"jacobi {policy} seed {seed}")
    return runs
