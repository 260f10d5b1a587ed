"""The live malleable run's timeline: one row per job, its nodes over time (a segment per size, labelled), and
below it the nodes busy over time, live beside the simulator's prediction for the same trace and policy."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from pathlib import Path


def segments(history: Sequence[tuple[float, int]]) -> list[tuple[float, float, int]]:
    """(start, end, nodes) of each stretch a job held nodes, from its (time, nodes) changes (pure)."""
    out = []
    for (t0, nodes), (t1, _) in itertools.pairwise(history):
        if nodes > 0 and t1 > t0:
            out.append((t0, t1, nodes))
    return out


def plot_live(
    jobs: Mapping[str, Sequence[tuple[float, int]]],
    busy: Mapping[str, Sequence[tuple[float, int]]],
    nodes: int,
    title: str,
    path: Path,
) -> Path:
    """`jobs`: name -> (time, nodes) history of the live run; `busy`: label -> (time, busy nodes) per run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(
        2, 1, figsize=(12, 2 + 0.35 * len(jobs) + 2.5), sharex=True, height_ratios=[max(2, len(jobs) * 0.35), 2.5]
    )
    colours = plt.get_cmap("viridis")
    for row, history in enumerate(jobs.values()):
        for start, end, held in segments(history):
            top.barh(row, end - start, left=start, height=0.7, color=colours(held / max(1, nodes)), edgecolor="k",
                     linewidth=0.4)  # fmt: skip
            if end - start > 4:
                top.text((start + end) / 2, row, str(held), ha="center", va="center", fontsize=7, color="w")
    top.set_yticks(range(len(jobs)), list(jobs))
    top.invert_yaxis()
    top.set_ylabel("job (nodes held)")
    top.grid(axis="x", alpha=0.3)
    top.set_title(title)
    for label, points in busy.items():
        times = [t for t, _ in points]
        bottom.step(times, [n for _, n in points], where="post", label=label, linewidth=1.0)
    bottom.set_ylim(0, nodes + 0.5)
    bottom.set_xlabel("time (s)")
    bottom.set_ylabel("nodes busy")
    bottom.grid(alpha=0.3)
    bottom.legend(loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
