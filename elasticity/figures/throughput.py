"""The throughput model's figure: measured Theta(N) and the fitted curve, extrapolation shaded."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from elasticity.model.throughput import ThroughputModel, measured_theta, stretch

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def write_throughput_figure(
    model: ThroughputModel,
    makespans: Sequence[float],
    path: Path | str,
    n_max: int,
    knee: int | None = None,
) -> Path:
    """The figure of build_throughput_figure, written as a PNG."""
    fig = build_throughput_figure(model, makespans, n_max, knee)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    return out


def build_throughput_figure(
    model: ThroughputModel,
    makespans: Sequence[float],
    n_max: int,
    knee: int | None = None,
) -> Figure:
    """Measured Theta(N) as points, the model as a line to n_max, beyond the measured N shaded; with a CPU
    demand, the cores' share N / S_N the model cannot exceed."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    measured = measured_theta(makespans)
    k = len(measured)
    top = max(n_max, k)
    ns = list(range(1, top + 1))
    fig = Figure(figsize=(6.4, 4.2))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    ax.plot(ns, ns, color="0.7", linestyle=":", label="ideal (Theta = N)")
    if model.demand > 0:  # what the cores allow before any contention: N / S_N
        ceiling = [n / stretch(n, model.demand) for n in ns]
        ax.plot(ns, ceiling, color="tab:orange", linestyle="--", label=f"the cores' share (u = {model.demand:.2f})")
    ax.plot(ns, [model.theta(n) for n in ns], color="tab:blue", marker=".", label="model")
    ax.plot(range(1, k + 1), measured, "o", color="tab:red", markersize=7, label="measured")
    if top > k:
        ax.axvspan(k + 0.5, top + 0.5, color="tab:blue", alpha=0.08, label="extrapolation")
    if knee is not None:
        ax.axvline(knee, color="tab:green", linestyle="--", linewidth=1, label=f"knee (N={knee})")
    se = f" ± {model.beta_stderr:.3f}" if model.beta_stderr > 0 else " (exact)"
    g = model.geometry
    load = f", u={model.demand:.2f}" if model.demand > 0 else ""
    ax.set_title(f"Theta(N), beta = {model.beta:.3f}{se}; R={g.ranks}, M={g.nodes}, C={g.cores:g}{load}")
    ax.set_xlabel("concurrent simulations N")
    ax.set_ylabel("throughput gain Theta(N)")
    ax.set_xlim(0.5, top + 0.5)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylim(0, max(top, max(measured)) * 1.05)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    return fig
