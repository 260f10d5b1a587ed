"""A campaign's tables as `up`, `campaign status|results` and `status` print them: pure rendering of its state."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from miniclusters.campaign.state_file import CampaignState, Report


def _table(rows: Sequence[Sequence[Any]], header: Sequence[str]) -> list[str]:
    cells = [[str(h) for h in header]] + [
        ["-" if v is None else (f"{v:.4g}" if isinstance(v, float) else str(v)) for v in row] for row in rows
    ]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]


def result_lines(state: Report) -> list[str]:
    """The science table and the operational report, as `up`, `campaign results` and `status` print them."""
    lines = ["results (forceCoeffs at the last iteration):"]
    members = state.get("members") or []
    lines += [
        "  " + line
        for line in _table(
            [
                [
                    m["ensemble"],
                    m["member"],
                    m["parameter"],
                    m["value"],
                    m["state"],
                    m["cl"],
                    m["cd"],
                    m["iterations"],
                    m["makespan"],
                    m["mean_duty"],
                ]
                for m in members
            ],
            ["ENSEMBLE", "MEMBER", "PARAMETER", "VALUE", "STATE", "CL", "CD", "ITER", "MAKESPAN_S", "MEAN_DUTY"],
        )
    ]
    for m in members:
        if m.get("reason"):
            lines.append(f"  {m['member']}: {m['reason']}")
    rows = state.get("ensemble_rows") or []
    lines.append("operations:")
    lines += [
        "  " + line
        for line in _table(
            [
                [
                    e["ensemble"],
                    e["state"],
                    f"{e['members_ok']}/{e['members']}",
                    ",".join(map(str, e["pods"])),
                    e["makespan"],
                    e["mean_duty"],
                    e["cpu_requested_mean_m"],
                    e["cpu_requested_peak_m"],
                    e["resizes"],
                    e["restarts"],
                ]
                for e in rows
            ],
            [
                "ENSEMBLE",
                "STATE",
                "OK",
                "PODS",
                "MAKESPAN_S",
                "MEAN_DUTY",
                "CPU_MEAN_M",
                "CPU_PEAK_M",
                "RESIZES",
                "RESTARTS",
            ],
        )
    ]
    lines.append(
        f"  cluster: {state.get('cpu_seconds_requested')} CPU-seconds requested, {state.get('resizes')} resizes, "
        f"{state.get('scale_events')} scale events"
    )
    unused = state.get("unused_scaled_pods")
    if unused:
        lines.append(f"  pods a scale-up added that ran no ensemble: {', '.join(map(str, unused))}")
    for path in state.get("files") or []:
        lines.append(f"  wrote {path}")
    return lines


def live_lines(state: CampaignState) -> list[str]:
    """What runs now (while the campaign is not finished)."""
    where = "running" if state.get("running") else f"stopped ({state.get('outcome') or state.get('stopped', '?')})"
    lines = [
        f"campaign: {where}, t={state.get('t')}s, size {state.get('size')}, requested {state.get('requested_m')}m, "
        f"{state.get('resizes')} resizes, {state.get('scale_events')} scale events",
        f"  work directory {state.get('workdir')}",
    ]
    rows = []
    for e in state.get("ensembles") or []:
        for m in e["members"]:
            rows.append(
                [
                    e["ensemble"],
                    e["state"],
                    ",".join(map(str, e["pods"])),
                    m["member"],
                    m["state"],
                    m["iterations"],
                    m["mean_duty"],
                ]
            )
    lines += [
        "  " + line
        for line in _table(rows, ["ENSEMBLE", "STATE", "PODS", "MEMBER", "MEMBER_STATE", "ITER", "MEAN_DUTY"])
    ]
    return lines


def print_campaign_state(state: CampaignState) -> None:
    lines = live_lines(state)
    if state.get("members"):
        lines += result_lines(state)
    for line in lines:
        click.echo(line)
