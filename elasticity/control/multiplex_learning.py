"""What the multiplexing planner learns while it runs: the iteration rate at each number N of simulations sharing
the pods, and the throughput model fitted to those rates (beta; REFERENCE.md section 6). Pure; the planner
(multiplex.py) owns one and alone feeds it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypedDict

from elasticity.model.throughput import Geometry, ThroughputModel, fit_beta


class RefitFields(TypedDict):
    """The `refit` event's fields: the fitted beta and its error, the top N observed, u and the knee."""

    beta: float
    beta_stderr: float
    n: int
    demand: float
    knee: int


@dataclass
class ThroughputLearning:
    """Rates by N and the model fitted to them; `fitted_levels` is the highest N of the current fit."""

    rates_by_n: dict[int, list[float]] = field(default_factory=dict)
    model: ThroughputModel | None = None
    fitted_levels: int = 0

    def reference(self, rate: float | None) -> bool:
        """A simulation profiled alone measured the N=1 reference: kept once; True when it was news."""
        if not rate or 1 in self.rates_by_n:
            return False
        self.rates_by_n[1] = [rate]
        return True

    def file(self, n: int, rates: list[float]) -> None:
        """The mean rate of the `n` simulations that ran through one settled window."""
        self.rates_by_n[n] = [sum(rates) / n]

    def refit(
        self, geometry: Geometry, cpu_demand: float, knee: Callable[[ThroughputModel], int]
    ) -> RefitFields | None:
        """Fit beta to the rates at N = 1..top (all needed). Returns the `refit` event's fields when the fit is
        news (a first fit, a new N, or a moved knee, which is what packing decides by), else None: the rates
        wobble by a few percent from step to step, and every event is also a Kubernetes Event under the
        operator, so a refit that decides nothing new is kept without a word."""
        if 1 not in self.rates_by_n or len(self.rates_by_n) < 2:
            return None
        top = max(self.rates_by_n)
        if any(n not in self.rates_by_n for n in range(1, top + 1)):
            return None
        makespans = [1.0 / self.rates_by_n[n][0] for n in range(1, top + 1)]
        model = fit_beta(makespans, geometry, cpu_demand)
        news = self.model is None or top != self.fitted_levels or knee(model) != knee(self.model)
        self.model, self.fitted_levels = model, top
        if not news:
            return None
        return {
            "beta": round(model.beta, 4),
            "beta_stderr": round(model.beta_stderr, 4),
            "n": top,
            "demand": round(model.demand, 4),
            "knee": knee(model),
        }

    def current(self, prior_beta: float | None, geometry: Geometry, cpu_demand: float) -> ThroughputModel | None:
        """The fitted model; before a fit, `prior_beta`; without one, beta = 0 with the profiles' CPU demand.

        That last is the processor-sharing stretch alone, a bound no co-location beats (beta >= 0 only adds to
        it): it keeps the knee when no N=1 rate was seen (simulations profiled together) instead of packing on
        headroom alone. None while nothing is profiled (`cpu_demand` 0)."""
        if self.model is not None:
            return self.model
        if prior_beta is not None:
            return ThroughputModel(prior_beta, 0.0, 1.0, geometry, cpu_demand)
        return ThroughputModel(0.0, 0.0, 1.0, geometry, cpu_demand) if cpu_demand > 0 else None
