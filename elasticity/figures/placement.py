"""The placement scenarios' figure, like Liu and Guitart's: overall response time and makespan per scenario."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path


def write_placement_figure(panels: Mapping[str, Sequence[tuple[str, float, float]]], path: Path | str) -> Path:
    """One column per panel (e.g. "local", "simulated"): bars of (scenario, response time, makespan), in seconds,
    each bar labelled with its change against the first scenario (NONE)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5.2 * max(1, len(panels)), 6.4))
    FigureCanvasAgg(fig)
    for column, (title, rows) in enumerate(panels.items()):
        names = [r[0] for r in rows]
        for row, (label, index, color) in enumerate(
            (("overall response time (s)", 1, "#3b6ea8"), ("makespan (s)", 2, "#c4793a"))
        ):
            ax = fig.add_subplot(2, max(1, len(panels)), row * max(1, len(panels)) + column + 1)
            values = [float(r[index]) for r in rows]
            bars = ax.bar(names, values, color=color)
            base = values[0] if values and values[0] else None
            for bar, value in zip(bars, values, strict=True):
                text = f"{value:.0f}" if base is None else f"{value:.0f}\n{100 * (value - base) / base:+.0f}%"
                ax.annotate(text, (bar.get_x() + bar.get_width() / 2, value), ha="center", va="bottom", fontsize=7)
            ax.set_ylabel(label)
            ax.set_ylim(0, max(values or [1]) * 1.25)
            ax.tick_params(axis="x", labelrotation=30, labelsize=8)
            if row == 0:
                ax.set_title(title)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=110)
    return out
