"""The multiplexing timeline (like the paper's Figure 7), drawn from the controller's JSON-lines event log.

One row per simulation: waiting to start, profiling (until its profile arrived), solving; markers for resizes
(Deferred/Infeasible answers in red), fairness adjustments and the end (done, failed, cancelled or timeout). A
bottom panel shows the total CPU requested over time against the allocatable CPU.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypedDict

ENDS = ("done", "failed", "cancelled", "timeout")
"""The events that end a simulation's row (the controller's terminal states)."""


class SimulationRow(TypedDict):
    """One simulation's row of the timeline: when it was submitted, came up, was profiled and ended (None: not
    yet), how it ended, and when a fairness step moved CPU to or from it."""

    start: float
    running: float | None
    profiled: float | None
    end: float | None
    end_kind: str | None
    fairness: list[float]


# open (events, here and below): the controller's event records, each kind with its own fields
def timeline_rows(events: Iterable[Mapping[str, Any]]) -> dict[str, SimulationRow]:
    """sim -> {start, running, profiled, end, end_kind, fairness: [t...]} from the event records (pure)."""
    rows: dict[str, SimulationRow] = {}
    for e in events:
        sim = e.get("sim")
        kind = e.get("kind") or e.get("event")
        t = e.get("t", e.get("time"))
        if kind == "fairness":
            for who in (e.get("receiver"), e.get("donor")):
                if who in rows:
                    rows[who]["fairness"].append(t)
            continue
        if not isinstance(sim, str):
            continue
        row = rows.setdefault(sim, {"start": t, "running": None, "profiled": None, "end": None, "end_kind": None,
                                    "fairness": []})  # fmt: skip
        if kind == "running":
            row["running"] = t
        elif kind == "profiled":
            row["profiled"] = t
        elif kind in ENDS:
            row["end"] = t
            row["end_kind"] = kind
    return rows


# open: as above
def write_timeline(events: list[Mapping[str, Any]], path: Path | str, allocatable_m: int | None = None) -> Path:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    rows = timeline_rows(events)
    times = [e.get("t", 0.0) for e in events] or [0.0]
    t_end = max(float(t) for t in times)
    fig = Figure(figsize=(9.0, 2.2 + 0.55 * max(1, len(rows))))
    FigureCanvasAgg(fig)
    grid = fig.add_gridspec(2, 1, height_ratios=[max(1, len(rows)), 1.6], hspace=0.35)
    ax = fig.add_subplot(grid[0])
    colors = {"wait": "0.85", "profile": "tab:orange", "solve": "tab:blue"}
    names = sorted(rows, key=lambda s: (rows[s]["start"], s))
    for y, sim in enumerate(names):
        r = rows[sim]
        end = r["end"] if r["end"] is not None else t_end
        running = r["running"] if r["running"] is not None else end
        profiled = r["profiled"] if r["profiled"] is not None else (end if r["running"] is not None else running)
        ax.barh(y, running - r["start"], left=r["start"], color=colors["wait"], height=0.5)
        ax.barh(y, max(0.0, profiled - running), left=running, color=colors["profile"], height=0.5)
        ax.barh(y, max(0.0, end - profiled), left=profiled, color=colors["solve"], height=0.5)
        for t in r["fairness"]:
            ax.plot([t], [y + 0.32], marker="v", color="tab:purple", markersize=6)
        if r["end_kind"] in ENDS and r["end_kind"] != "done":
            ax.plot([end], [y], marker="x", color="tab:red", markersize=9)
    resize_ok = [e["t"] for e in events if (e.get("kind") or e.get("event")) == "resize"]
    refused = [e["t"] for e in events if (e.get("kind") or e.get("event")) == "resize-answer"
               and e.get("answer") in ("deferred", "infeasible")]  # fmt: skip
    for t in resize_ok:
        ax.axvline(t, color="tab:green", linewidth=0.8, alpha=0.6)
    for t in refused:
        ax.axvline(t, color="tab:red", linewidth=1.0, linestyle="--")
    ax.set_yticks(range(len(names)), names)
    ax.invert_yaxis()
    ax.set_xlim(0, max(1.0, t_end))
    ax.set_title("Multiplexing timeline: wait (grey), profile (orange), solve (blue); resizes (green lines), "
                 "refused (red dashed), fairness (purple)", fontsize=8)  # fmt: skip
    ax.grid(axis="x", alpha=0.3)

    cpu = fig.add_subplot(grid[1], sharex=ax)
    steps = [(float(e["t"]), int(e["total_m"])) for e in events
             if (e.get("kind") or e.get("event")) in ("resize", "controller-start") and "total_m" in e]  # fmt: skip
    if steps:
        xs = [t for t, _ in steps] + [t_end]
        ys = [m for _, m in steps] + [steps[-1][1]]
        cpu.step(xs, ys, where="post", color="tab:blue", label="requested (sum of pods)")
    if allocatable_m:
        cpu.axhline(allocatable_m, color="0.4", linestyle=":", label="allocatable")
    cpu.set_ylabel("CPU m")
    cpu.set_xlabel("seconds since the controller started")
    cpu.grid(alpha=0.3)
    if steps or allocatable_m:
        cpu.legend(loc="upper right", fontsize=7)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110, bbox_inches="tight")
    return out
