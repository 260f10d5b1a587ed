"""How long an instance takes to come online, as a function of its size and tree fan-out: a model fitted from
measured runs (bench/bench_scale.py), to predict sizes this machine cannot reach.

    T(n, k) = a + b*n + c*depth(n, k) + d*min(k, n - 1) + e*n*log2(n)

- b*n: each broker's own start-up work (on one machine, every broker shares the same cores, so it adds up);
- c*depth: a hello waits for its parent to be up, level after level of the k-ary tree;
- d*min(k, n-1): the lead (and each interior broker) takes its children's hellos one after another;
- e*n*log2(n): what grows faster than the brokers themselves: each membership event goes to every rank, and
  a longer start-up publishes more of them (coalesced per max(50 ms, N x 0.5 ms),
  tree_link.membership_event_delay).

Pure: numpy's least squares on the measured points (no term but the constant may come out negative), no
processes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .topology import kary

TERMS = ("constant", "per broker", "per tree level", "per child of the lead", "per broker x log2(size)")


@dataclass(frozen=True)
class Run:
    """One measured start: `size` brokers, tree fan-out `fanout`, `seconds` until the initial program ran."""

    size: int
    fanout: int
    seconds: float


def depth(size: int, fanout: int) -> int:
    """Levels below the lead in the k-ary tree the broker builds (topology.kary; fan-out 0 is flat)."""
    parents = kary(size, fanout).parents
    levels = [0] * size
    for rank in range(1, size):  # a parent's rank is always lower than its child's in a k-ary tree
        levels[rank] = levels[parents[rank]] + 1
    return max(levels)


def features(size: int, fanout: int) -> tuple[float, ...]:
    children = size - 1 if fanout <= 0 else min(fanout, size - 1)
    return (1.0, float(size), float(depth(size, fanout)), float(children), size * math.log2(max(size, 1)))


@dataclass(frozen=True)
class BootstrapModel:
    """Fitted coefficients (seconds) of TERMS, and the runs they were fitted from."""

    coefficients: tuple[float, ...]
    fitted_from: tuple[Run, ...]

    def predict(self, size: int, fanout: int) -> float:
        return sum(c * x for c, x in zip(self.coefficients, features(size, fanout), strict=True))

    def residuals(self) -> list[float]:
        """Measured minus predicted, per fitted run (what the model misses where it was fitted)."""
        return [run.seconds - self.predict(run.size, run.fanout) for run in self.fitted_from]

    def describe(self) -> list[tuple[str, float]]:
        return list(zip(TERMS, self.coefficients, strict=True))


def fit(runs: Iterable[Run]) -> BootstrapModel:
    """Least squares over every run; needs at least as many runs as terms, over more than one size and fan-out."""
    import numpy as np

    measured = tuple(runs)
    if len(measured) < len(TERMS):
        raise ValueError(f"fitting needs at least {len(TERMS)} runs, got {len(measured)}")
    if len({r.size for r in measured}) < 3 or len({r.fanout for r in measured}) < 2:
        raise ValueError("fitting needs runs at three sizes or more and two fan-outs or more")
    matrix = np.array([features(r.size, r.fanout) for r in measured])
    seconds = np.array([r.seconds for r in measured])
    # Every term but the constant is a cost, never a saving: where least squares makes one negative (terms that
    # grow alike over the measured range trade off against each other), that term is dropped and the rest
    # refitted, most negative first (a small active-set non-negative least squares).
    active = list(range(len(TERMS)))
    while True:
        solution, *_ = np.linalg.lstsq(matrix[:, active], seconds, rcond=None)
        negative = [(value, term) for value, term in zip(solution, active, strict=True) if term and value < 0]
        if not negative:
            break
        active.remove(min(negative)[1])
    coefficients = [0.0] * len(TERMS)
    for value, term in zip(solution, active, strict=True):
        coefficients[term] = float(value)
    return BootstrapModel(tuple(coefficients), measured)


def relative_error(predicted: float, measured: float) -> float:
    return (predicted - measured) / measured


def prediction_table(model: BootstrapModel, sizes: Sequence[int], fanouts: Sequence[int]) -> list[list[str]]:
    """Rows of predicted seconds: one per fan-out, one column per size."""
    return [[f"kary:{k}", *(f"{model.predict(n, k):.1f} s" for n in sizes)] for k in fanouts]
