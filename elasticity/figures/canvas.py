"""What every timeline figure does alike: an Agg figure (no global matplotlib backend, no pyplot state), a panel
of step lines over time, and the title-and-save ending."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypedDict


class LineStyle(TypedDict, total=False):
    """The line style keywords our figures pass to matplotlib's ``step``."""

    color: str
    linestyle: str
    alpha: float
    linewidth: float


StepLine = tuple[str, Sequence[float], LineStyle]
"""(legend label, one value per time, line style for matplotlib's ``step``)."""


def figure(figsize: tuple[float, float]) -> Any:
    """A figure drawn on its own Agg canvas."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize)
    FigureCanvasAgg(fig)
    return fig


def step_panel(ax: Any, times: Sequence[float], lines: Sequence[StepLine], ylabel: str, xlabel: str = "") -> None:
    """Step lines (each value holds until the next time), labelled, with a legend and a light grid."""
    for label, values, style in lines:
        ax.step(times, values, where="post", label=label, **style)
    ax.set_ylabel(ylabel)
    if xlabel:
        ax.set_xlabel(xlabel)
    ax.legend(loc="upper right")
    ax.grid(alpha=0.3)


def save(fig: Any, path: Path, title: str) -> Path:
    """Title the figure, lay it out and write it as a PNG."""
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path
