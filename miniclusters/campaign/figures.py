"""The campaign's polar figure: Cl and Cd against the swept value (the timeline is elasticity.figures.campaign)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from elasticity.figures.canvas import figure, save
from miniclusters.campaign.results import MemberResult

LABELS = {"angleOfAttack": "angle of attack (deg)", "mach": "Mach number"}


def plot_polar(members: Sequence[MemberResult], path: Path, title: str) -> Path:
    """One column per swept parameter: Cl (top) and Cd (bottom) against the value, one line per ensemble."""
    parameters = sorted({m.parameter for m in members})
    fig = figure((5 * max(1, len(parameters)), 6))
    axes = fig.subplots(2, max(1, len(parameters)), squeeze=False)
    for col, parameter in enumerate(parameters):
        for ensemble in sorted({m.ensemble for m in members if m.parameter == parameter}):
            rows = sorted((m for m in members if m.ensemble == ensemble and m.cl is not None), key=lambda m: m.value)
            xs = [m.value for m in rows]
            axes[0][col].plot(xs, [m.cl for m in rows], "o-", label=ensemble)
            axes[1][col].plot(xs, [m.cd for m in rows], "s-", label=ensemble)
            for m in members:
                if m.ensemble == ensemble and m.cl is None:
                    for ax in (axes[0][col], axes[1][col]):
                        ax.axvline(m.value, color="tab:red", alpha=0.4, linestyle=":")
        axes[0][col].set_ylabel("Cl")
        axes[1][col].set_ylabel("Cd")
        axes[1][col].set_xlabel(LABELS.get(parameter, parameter))
        for ax in (axes[0][col], axes[1][col]):
            ax.grid(alpha=0.3)
            ax.legend(loc="best")
    return save(fig, path, title)
