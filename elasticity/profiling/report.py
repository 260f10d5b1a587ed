"""Human output of a profile: rich tables and a PNG like the multiplexing paper's Figure 1.

The figure is drawn on an Agg canvas directly (no pyplot), so it needs no display and leaves the
process-wide matplotlib backend alone.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from elasticity.policy.cpu_allocation import AllocationPlan
from elasticity.profiling.duty_cycle import DutyCycleAnalysis


def rank_table(analysis: DutyCycleAnalysis) -> Table:
    """Per rank: steady-state compute/MPI time, duty cycle, allocation and reclaimable capacity."""
    t = Table(
        title=f"Duty cycle per rank (boundary {analysis.boundary_call}, "
        f"first {analysis.skip_fraction:.0%} of iterations skipped)"
    )
    for col in ("rank", "host", "iters", "compute s", "MPI s", "duty", "alloc m", "reclaim m", "main MPI call"):
        t.add_column(col, justify="left" if col in ("host", "main MPI call") else "right")
    for i, r in enumerate(analysis.ranks):
        top = max(r.mpi_by_call.items(), key=lambda kv: kv[1])[0] if r.mpi_by_call else "-"
        t.add_row(
            str(r.rank),
            r.hostname,
            f"{r.n_iterations} (-{r.skipped})",
            f"{r.steady_compute:.3f}",
            f"{r.steady_mpi:.3f}",
            f"{r.steady_duty:.1%}",
            f"{analysis.allocation_millicores[i]:.0f}",
            f"{analysis.reclaimable_millicores[i]:.0f}",
            top,
        )
    t.caption = f"total reclaimable: {analysis.total_reclaimable_millicores:.0f}m"
    return t


def plan_table(plan: AllocationPlan) -> Table:
    """Per pod: ranks, measured need, proposed request (requests only) and resulting kernel weight."""
    budget = f", budget {plan.budget_millicores}m" if plan.budget_millicores is not None else ""
    t = Table(title=f"Proposed CPU requests ({plan.mode}, weights {plan.formula}{budget})")
    for col in ("pod", "ranks", "need m", "request", "kernel weight"):
        t.add_column(col, justify="left" if col in ("pod", "ranks") else "right")
    for p in plan.pods:
        t.add_row(p.pod, _ranges(p.ranks), f"{p.need_millicores:.0f}", p.quantity, str(p.kernel_weight))
    t.caption = (
        f"total request {plan.total_request_millicores}m; weight-ratio error {plan.ratio_error:.1%} "
        f"(proportional: {plan.proportional_ratio_error:.1%}); no limits set"
    )
    return t


def _ranges(ranks: tuple[int, ...]) -> str:
    """'0-3,6' style rank list."""
    spans: list[list[int]] = []
    for r in sorted(ranks):
        if spans and spans[-1][1] == r - 1:
            spans[-1][1] = r
        else:
            spans.append([r, r])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def print_report(
    analysis: DutyCycleAnalysis, plan: AllocationPlan | None = None, console: Console | None = None
) -> None:
    """Print the rank table and, when given, the pod request table."""
    console = console or Console()
    console.print(rank_table(analysis))
    if plan is not None:
        console.print(plan_table(plan))


def write_figure(analysis: DutyCycleAnalysis, path: Path | str, title: str | None = None) -> Path:
    """PNG: left, stacked compute/MPI time per rank (steady state); right, duty cycle per rank."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    ranks = np.array([r.rank for r in analysis.ranks])
    comp = np.array([r.steady_compute for r in analysis.ranks])
    mpi = np.array([r.steady_mpi for r in analysis.ranks])
    duty = analysis.duty * 100.0

    fig = Figure(figsize=(max(8.0, 0.35 * ranks.size + 6.0), 3.8), layout="constrained")
    FigureCanvasAgg(fig)
    left, right = fig.subplots(1, 2)
    left.bar(ranks, comp, color="#1f77b4", label="compute")
    left.bar(ranks, mpi, bottom=comp, color="#d62728", label="MPI (waiting)")
    left.set_xlabel("MPI rank")
    left.set_ylabel("time [s]")
    left.set_title("Time split per rank")
    left.legend(loc="lower right", fontsize="small")

    right.bar(ranks, duty, color="#2ca02c")
    right.axhline(float(np.nanmean(duty)), color="k", linestyle="--", linewidth=1, label="mean")
    right.set_xlabel("MPI rank")
    right.set_ylabel("duty cycle [%]")
    right.set_ylim(0, 100)
    right.set_title("Duty cycle per rank")
    right.legend(loc="upper right", fontsize="small")
    for ax in (left, right):
        if ranks.size <= 32:
            ax.set_xticks(ranks)
    if title:
        fig.suptitle(title)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    return out
