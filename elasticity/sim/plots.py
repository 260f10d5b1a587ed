"""The papers' figures: metrics against malleable share per policy, and node utilization over time."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from elasticity.sim.experiment import Row, Run

_PANELS = (
    ("mean_wait", "mean wait (s)"),
    ("mean_run", "mean run time (s)"),
    ("mean_turnaround", "mean turnaround (s)"),
    ("utilization", "node utilization"),
    ("expands_per_job", "expands per job"),
    ("shrinks_per_job", "shrinks per job"),
)


def plot_rows(rows: Sequence[Row], title: str, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 3, figsize=(13, 7))
    policies = list(dict.fromkeys(row.policy for row in rows))
    for ax, (metric, label) in zip(axes.flat, _PANELS, strict=True):
        for policy in policies:
            mine = sorted((r for r in rows if r.policy == policy), key=lambda r: r.malleable)
            x = [r.malleable for r in mine]
            y = [r.mean[metric] for r in mine]
            err = [r.iqr[metric] / 2 for r in mine]
            style = "o-" if len(x) > 1 else "o"
            ax.errorbar(x, y, yerr=err, fmt=style, capsize=3, label=policy)
        ax.set_xlabel("malleable jobs (%)")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes.flat[0].legend()
    fig.suptitle(f"{title} (means over seeds; bars: interquartile range)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_utilization(runs: Sequence[Run], title: str, path: Path) -> Path:
    """Busy nodes over time for seed 0 of each policy at the largest malleable share."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    top = max(run.malleable for run in runs)
    fig, ax = plt.subplots(figsize=(12, 4.5))
    for run in runs:
        if run.seed != 0 or run.malleable != top:
            continue
        times = [t / 3600 for t, _ in run.result.busy]
        busy = [nodes / run.result.nodes for _, nodes in run.result.busy]
        ax.step(times, busy, where="post", label=run.policy, linewidth=0.8)
    ax.set_xlabel("time (h)")
    ax.set_ylabel("nodes busy (fraction)")
    ax.set_ylim(0, 1.05)
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title(f"{title}: utilization over time ({top:g}% malleable, seed 0)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
