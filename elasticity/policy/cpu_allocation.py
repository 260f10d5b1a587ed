"""Proportional per-pod CPU requests from measured rank needs (REFERENCE.md sections 4 and 6).

A pod's request is the sum of what its ranks need (need_i = duty_i x allocation_i x headroom),
clamped to [floor, ceiling] millicores, optionally scaled to a total budget B (r_p = B w_p / sum w,
water-filled around the clamps), and rounded to whole millicores: the kubelet converts requests to
kernel weights in milliCPU, so a finer request changes nothing on the node. Only requests are
produced, never limits: CFS quotas throttle tightly-coupled MPI ranks badly.

How the kernel sees a request (why rounding and the weight-preserving mode matter; the mapping itself lives
in elasticity/model/cpu.py, shared with the local backend's cgroups):
- cgroup v1: shares = milliCPU * 1024 // 1000, at least 2. Every request of 2m or more maps to its
  own shares value (one millicore is 1.024 shares), but 0m, 1m and 2m all become 2 shares.
- cgroup v2, old linear formula: weight = 1 + (shares - 2) * 9999 // 262142; one weight step is
  about 25.6m, so requests below ~27m all get weight 1.
- cgroup v2, runc >= 1.3.2 / crun >= 1.23: weight = ceil(10^((l^2 + 125 l)/612 - 7/34)),
  l = log2(shares). Not proportional: 1000m:100m gives 100:17, so small pods get relatively more
  CPU under contention than their requests say. The "weight-preserving" mode searches requests
  whose kernel weights keep the intended ratios, never reserving more in total than the
  proportional requests did.

Pure functions and plain dataclasses: no I/O, shared by the simulator and the live controllers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from elasticity.model.cpu import FORMULAS, MAX_MILLICORES, Formula, kernel_weights, weight_table
from elasticity.model.resources import format_millicores

Mode = Literal["proportional", "weight-preserving"]
MODES: tuple[Mode, ...] = ("proportional", "weight-preserving")
MILLICORES_PER_RANK = 1000  # a single-threaded MPI rank cannot use more than one core


def rank_needs_millicores(
    duty: Sequence[float] | np.ndarray,
    allocation_millicores: float | Sequence[float] | np.ndarray = 1000.0,
    headroom: float = 1.0,
) -> np.ndarray:
    """need_i = d_i r_i headroom: the CPU a rank keeps busy. An unknown (NaN) duty counts as 1."""
    if headroom <= 0:
        raise ValueError(f"headroom must be positive, got {headroom}")
    d = np.nan_to_num(np.asarray(duty, dtype=float), nan=1.0)
    if np.any(d < 0) or np.any(d > 1):
        raise ValueError("duty cycles must lie in [0, 1]")
    needs: np.ndarray = d * np.asarray(allocation_millicores, dtype=float) * headroom
    return needs


def ratio_error(
    requests: Sequence[int] | np.ndarray, intended: Sequence[float] | np.ndarray, formula: Formula
) -> float:
    """Worst relative deviation of a pod's share of kernel weight from its intended share.

    0 means the kernel divides a contended CPU exactly in the intended ratios.
    """
    t = np.asarray(intended, dtype=float)
    if t.size == 0 or t.sum() <= 0:
        return 0.0
    w = kernel_weights(requests, formula).astype(float)
    share_w = w / w.sum()
    share_t = t / t.sum()
    keep = share_t > 0
    return float(np.max(np.abs(share_w[keep] - share_t[keep]) / share_t[keep])) if keep.any() else 0.0


@dataclass(frozen=True)
class PodRequest:
    """The proposed CPU request of one pod (a request only; limits are never set)."""

    pod: str
    ranks: tuple[int, ...]
    need_millicores: float
    target_millicores: float
    request_millicores: int
    kernel_weight: int

    @property
    def quantity(self) -> str:
        """The request as a Kubernetes quantity."""
        return format_millicores(self.request_millicores)


@dataclass(frozen=True)
class AllocationPlan:
    """Per-pod requests plus how faithfully the kernel will honour their ratios."""

    pods: tuple[PodRequest, ...]
    mode: Mode
    formula: Formula
    budget_millicores: int | None
    ratio_error: float
    proportional_ratio_error: float

    @property
    def total_request_millicores(self) -> int:
        """Sum of the pods' requests."""
        return sum(p.request_millicores for p in self.pods)

    def requests(self) -> dict[str, int]:
        """pod -> request in millicores."""
        return {p.pod: p.request_millicores for p in self.pods}


def water_fill(weights: np.ndarray, lo: np.ndarray, hi: np.ndarray, budget: float) -> np.ndarray:
    """x_p = clamp(lam w_p, lo_p, hi_p) with sum x = budget, as close as the clamps allow.

    Pods with zero weight stay at their floor: a proportional share of nothing is nothing. lam is searched
    by bisection on log(lam): weights of any size (a denormal 2e-309 beside 4000) need a lam far past the
    largest float, and lam * w on a linear scale overflowed to inf (0 * inf = nan, cast to -2**63 millicores).
    """
    if budget < lo.sum() - 1e-9:
        raise ValueError(f"budget {budget:g}m is below the sum of the pods' floors ({lo.sum():g}m)")
    positive = weights > 0
    reachable = np.where(positive, hi, lo).astype(float)
    if budget >= reachable.sum():
        return reachable
    log_w = np.full(weights.shape, -np.inf)
    log_w[positive] = np.log(np.minimum(weights[positive], np.finfo(float).max))

    def fill(log_lam: float) -> np.ndarray:
        # exp(-inf) = 0: a zero weight stays at its floor; e^700 (1e304) is past any ceiling, and never overflows
        return np.clip(np.exp(np.minimum(log_lam + log_w, 700.0)), lo, hi)

    # At the lower end every lam w_p is below 1e-300 (at its floor, which is >= 0); at the upper end every
    # positive one is at its ceiling: the answer lies between, and both ends are finite.
    low = -700.0 - float(log_w[positive].max())
    high = float(np.log(max(float(hi.max()), 1.0))) - float(log_w[positive].min()) + 1.0
    for _ in range(200):
        middle = 0.5 * (low + high)
        if fill(middle).sum() < budget:
            low = middle
        else:
            high = middle
    return fill(high)


def round_to_budget(x: np.ndarray, lo: np.ndarray, hi: np.ndarray, budget: int) -> np.ndarray:
    """Whole millicores within [lo, hi], total <= budget, largest fractional parts rounded up first."""
    base = np.clip(np.floor(x + 1e-9), lo, hi).astype(np.int64)
    while base.sum() > budget and np.any(base > lo):
        over = np.where(base > lo, base - x, -np.inf)
        base[int(np.argmax(over))] -= 1
    spare = budget - int(base.sum())
    frac = x - base
    for p in np.argsort(-frac, kind="stable"):
        if spare <= 0 or frac[p] <= 1e-9:
            break
        if base[p] < hi[p]:
            base[p] += 1
            spare -= 1
    return base


def _share_errors(weights: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """ratio_error for each row of a (candidates x pods) weight matrix."""
    w = weights.astype(float)
    share_w = w / w.sum(axis=-1, keepdims=True)
    share_t = targets / targets.sum()
    keep = share_t > 0
    errors: np.ndarray = np.max(np.abs(share_w[..., keep] - share_t[keep]) / share_t[keep], axis=-1)
    return errors


def _weight_preserving(
    targets: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    cap_total: int,
    formula: Formula,
    fallback: np.ndarray,
    tolerance: float,
    n_scales: int = 2000,
) -> np.ndarray:
    """Requests whose kernel weights are closest to proportional to `targets`, total <= cap_total.

    For a scale s, pod p aims at kernel weight round(s t_p) and takes the smallest request that
    reaches it (clamped to its floor and ceiling). Larger s gives finer weights but larger
    requests. All scales on a fine log grid are scored at once; among candidates that fit
    cap_total and are within `tolerance` of the best ratio error, the one reserving the most CPU
    wins (closest to what the ranks need). The proportional requests stay a candidate, so this
    mode is never worse than the proportional one.
    """
    positive = targets > 0
    if not positive.any() or targets.sum() <= 0:
        return fallback
    table = weight_table(formula)
    scales = np.geomspace(0.5 / targets[positive].max(), float(table[-1]) / targets[positive].min(), n_scales)
    want = np.maximum(1, np.rint(scales[:, None] * targets[None, :])).astype(np.int64)
    m = np.searchsorted(table, want, side="left")
    m = np.where(m > MAX_MILLICORES, hi, m)
    cands = np.where(positive, np.clip(m, lo, hi), lo).astype(np.int64)
    cands = np.vstack([fallback[None, :], cands])
    fits = cands.sum(axis=1) <= cap_total
    fits[0] = True
    cands = cands[fits]
    errors = _share_errors(table[np.clip(cands, 0, MAX_MILLICORES)], targets)
    good = np.flatnonzero(errors <= errors.min() + tolerance)
    totals = cands[good].sum(axis=1)
    best = good[np.lexsort((errors[good], -totals))[0]]
    chosen: np.ndarray = cands[best]
    return chosen


def allocate_pod_requests(
    rank_need_millicores: Sequence[float] | np.ndarray,
    placement: Mapping[str, Sequence[int]],
    *,
    floor_millicores: int = 10,
    ceiling_millicores: int | None = None,
    budget_millicores: int | None = None,
    mode: Mode = "proportional",
    formula: Formula = "v2-nonlinear",
    ratio_tolerance: float = 0.01,
) -> AllocationPlan:
    """Per-pod CPU requests: the sum of the needs of the ranks each pod hosts, see the module doc.

    `placement` maps pod name -> ranks it hosts (every rank in at most one pod). Without a ceiling
    a pod gets at most 1000m per rank it hosts. With a budget, requests are scaled to it (the floor
    and ceiling still hold; a budget below the sum of floors is an error). In weight-preserving
    mode, `ratio_tolerance` is how much worse than the best achievable ratio error a candidate may
    be if it reserves more CPU.
    """
    needs = np.asarray(rank_need_millicores, dtype=float)
    if not np.all(np.isfinite(needs)) or np.any(needs < 0):
        raise ValueError("rank needs must be finite and non-negative")
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; choose one of {', '.join(MODES)}")
    if formula not in FORMULAS:
        raise ValueError(f"unknown weight formula {formula!r}; choose one of {', '.join(FORMULAS)}")
    if floor_millicores < 1:
        raise ValueError(f"floor must be at least 1m (the kubelet's smallest unit), got {floor_millicores}m")
    if ceiling_millicores is not None and ceiling_millicores < floor_millicores:
        raise ValueError(f"ceiling {ceiling_millicores}m is below floor {floor_millicores}m")
    if budget_millicores is not None and budget_millicores < 0:
        raise ValueError(f"budget must be non-negative, got {budget_millicores}m")

    seen: dict[int, str] = {}
    for pod, ranks in placement.items():
        for r in ranks:
            if not 0 <= r < needs.size:
                raise ValueError(f"pod {pod!r} hosts rank {r}, but only ranks 0..{needs.size - 1} were measured")
            if r in seen:
                raise ValueError(f"rank {r} is placed in both pod {seen[r]!r} and pod {pod!r}")
            seen[r] = pod

    names = list(placement)
    pod_need = np.array([float(needs[list(placement[p])].sum()) for p in names])
    lo = np.full(len(names), floor_millicores, dtype=np.int64)
    if ceiling_millicores is not None:
        hi = np.full(len(names), ceiling_millicores, dtype=np.int64)
    else:
        hi = np.array([max(floor_millicores, MILLICORES_PER_RANK * len(placement[p])) for p in names], dtype=np.int64)

    if budget_millicores is None:
        target = np.clip(pod_need, lo, hi)
        proportional = np.clip(np.ceil(target - 1e-9), lo, hi).astype(np.int64)
    else:
        target = water_fill(pod_need, lo.astype(float), hi.astype(float), float(budget_millicores))
        proportional = round_to_budget(target, lo, hi, budget_millicores)

    if mode == "weight-preserving":
        cap = int(proportional.sum())
        requests = _weight_preserving(target, lo, hi, cap, formula, proportional, ratio_tolerance)
    else:
        requests = proportional

    weights = kernel_weights(requests, formula)
    pods = tuple(
        PodRequest(
            pod=name,
            ranks=tuple(int(r) for r in placement[name]),
            need_millicores=float(pod_need[i]),
            target_millicores=float(target[i]),
            request_millicores=int(requests[i]),
            kernel_weight=int(weights[i]),
        )
        for i, name in enumerate(names)
    )
    return AllocationPlan(
        pods=pods,
        mode=mode,
        formula=formula,
        budget_millicores=budget_millicores,
        ratio_error=ratio_error(requests, target, formula),
        proportional_ratio_error=ratio_error(proportional, target, formula),
    )


def placement_from_hostnames(hostnames: Sequence[str]) -> dict[str, list[int]]:
    """pod (hostname) -> ranks, from each rank's hostname as recorded in its trace."""
    out: dict[str, list[int]] = {}
    for rank, host in enumerate(hostnames):
        out.setdefault(host, []).append(rank)
    return out
