"""The campaign's timeline PNG, from its JSON-lines event log alone (so the CLI and the lead's /cluster page draw
the same figure): a lane per ensemble and per member, resizes and scaling marked; requested vs allocatable CPU
and the cluster size below."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypedDict

from elasticity.figures.canvas import StepLine, figure, save, step_panel

STATE_COLOURS = {"done": "tab:green", "failed": "tab:red", "cancelled": "tab:gray", "running": "tab:blue"}


class MemberRow(TypedDict, total=False):
    """A campaign member in the table beside the figure (mean_duty and pods once it was profiled)."""

    ensemble: str | None
    member: str
    state: str | None
    mean_duty: float
    pods: list[str]


# open (events, here and below): the campaign's event log records, each kind with its own fields
def member_states(events: Sequence[dict[str, Any]]) -> dict[str, str]:
    """Each member's last state in the log (`member` events)."""
    return {str(e["member"]): str(e["state"]) for e in events if e.get("kind") == "member"}


# open (the answer): broker/rest/web/cluster.py holds these rows as plain dicts; each is a MemberRow
def member_rows(events: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per member: ensemble, state, mean duty cycle once profiled (for tables beside the figure)."""
    rows: dict[str, MemberRow] = {}
    for e in events:
        if e.get("kind") != "member":
            continue
        row = rows.setdefault(str(e["member"]), {"ensemble": e.get("ensemble"), "member": e["member"]})
        row["state"] = e.get("state")
        if e.get("duty"):
            row["mean_duty"] = round(sum(e["duty"]) / len(e["duty"]), 3)
            row["pods"] = sorted(set(e.get("pods") or []))
    return [dict(row) for row in rows.values()]


def plot_campaign_timeline(events: Sequence[dict[str, Any]], path: Path, title: str = "campaign") -> Path:  # open
    """Top: a lane per ensemble and per member (bars from start to end, coloured by state), resizes and scaling
    marked. Bottom: requested vs allocatable CPU and the cluster size over time."""
    samples = [e for e in events if e.get("kind") == "sample"]
    if not samples:
        raise ValueError("the event log has no samples to plot")
    end_t = float(samples[-1]["t"])
    fig = figure((11, 7))
    top, bottom = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 2]})
    lanes: list[str] = []
    state_of = member_states(events)
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
    cpu: list[StepLine] = [
        ("CPU requested", [s["requested_m"] / 1000 for s in samples], {"color": "tab:orange"}),
        ("CPU allocatable", [s["allocatable_m"] / 1000 for s in samples], {"color": "black", "linestyle": "--"}),
        ("size (pods)", [s["size"] for s in samples], {"color": "tab:cyan"}),
    ]
    step_panel(bottom, times, cpu, "CPUs / pods", "time (s)")
    return save(fig, path, title)
