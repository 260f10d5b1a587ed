"""The campaign's two figures: the polar (Cl, Cd against the swept value) and the operational timeline."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from miniclusters.campaign.results import MemberResult

LABELS = {"angleOfAttack": "angle of attack (deg)", "mach": "Mach number"}
STATE_COLOURS = {"done": "tab:green", "failed": "tab:red", "cancelled": "tab:gray", "running": "tab:blue"}


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_polar(members: Sequence[MemberResult], path: Path, title: str) -> Path:
    """One column per swept parameter: Cl (top) and Cd (bottom) against the value, one line per ensemble."""
    plt = _pyplot()
    parameters = sorted({m.parameter for m in members})
    fig, axes = plt.subplots(2, max(1, len(parameters)), figsize=(5 * max(1, len(parameters)), 6), squeeze=False)
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
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_timeline(events: Sequence[dict[str, Any]], members: Sequence[MemberResult], path: Path, title: str) -> Path:
    """Top: a lane per ensemble and per member (bars from start to end, coloured by state), resizes and scaling
    marked. Bottom: requested vs allocatable CPU and the cluster size over time."""
    plt = _pyplot()
    samples = [e for e in events if e.get("kind") == "sample"]
    if not samples:
        raise ValueError("the event log has no samples to plot")
    end_t = float(samples[-1]["t"])
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(11, 7), sharex=True, gridspec_kw={"height_ratios": [3, 2]})
    lanes: list[str] = []
    state_of = {m.member: m.state for m in members}
    ensembles = [e["ensemble"] for e in events if e.get("kind") == "submitted"]
    for ensemble in dict.fromkeys(ensembles):
        start = next(
            (float(e["t"]) for e in events if e.get("kind") == "ensemble-running" and e.get("ensemble") == ensemble),
            None,
        )
        end = next(
            (
                float(e["t"])
                for e in events
                if e.get("kind") in ("ensemble-done", "ensemble-cancelled") and e.get("ensemble") == ensemble
            ),
            end_t,
        )
        lanes.append(f"ensemble {ensemble}")
        y = len(lanes) - 1
        if start is not None:
            top.barh(y, end - start, left=start, color="tab:purple", alpha=0.5, height=0.6)
        for member in dict.fromkeys(
            str(e["member"]) for e in events if e.get("kind") == "member" and e.get("ensemble") == ensemble
        ):
            marks = [e for e in events if e.get("kind") == "member" and e.get("member") == member]
            m_start = next((float(e["t"]) for e in marks if e.get("state") == "running"), None)
            m_end = next((float(e["t"]) for e in marks if e.get("state") in ("done", "failed", "cancelled")), end_t)
            lanes.append(f"  {member}")
            if m_start is not None:
                colour = STATE_COLOURS.get(state_of.get(member, "running"), "tab:blue")
                top.barh(len(lanes) - 1, m_end - m_start, left=m_start, color=colour, height=0.6)
                profiled = next((float(e["t"]) for e in marks if e.get("duty")), None)
                if profiled is not None:
                    top.plot([profiled], [len(lanes) - 1], "k|", markersize=12)
    for e in events:
        if e.get("kind") == "resize" and e.get("outcome") != "deferred":
            top.axvline(float(e["t"]), color="tab:orange", alpha=0.35, linewidth=1)
        elif e.get("kind") == "scaled":
            top.axvline(float(e["t"]), color="tab:cyan", alpha=0.9, linewidth=2)
    top.set_yticks(range(len(lanes)), lanes)
    top.invert_yaxis()
    top.set_title("ensembles and members (| profiled; orange: resize; cyan: scale)")
    top.grid(axis="x", alpha=0.3)
    times = [float(s["t"]) for s in samples]
    bottom.step(
        times, [s["requested_m"] / 1000 for s in samples], where="post", label="CPU requested", color="tab:orange"
    )
    bottom.step(
        times,
        [s["allocatable_m"] / 1000 for s in samples],
        where="post",
        label="CPU allocatable",
        color="black",
        linestyle="--",
    )
    bottom.step(times, [s["size"] for s in samples], where="post", label="size (pods)", color="tab:cyan")
    bottom.set_ylabel("CPUs / pods")
    bottom.set_xlabel("time (s)")
    bottom.legend(loc="upper right")
    bottom.grid(alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
