"""Human output of the multiplexing controller: progress lines, the closing summary table, its JSON form, and
its saved state as `minicluster status` prints it."""

from __future__ import annotations

import json
from typing import TypedDict

import click
from rich.console import Console
from rich.table import Table

from elasticity.control.multiplex import SummaryRow, summary_rows
from elasticity.control.multiplex_runner import Progress
from miniclusters.multiplex.session import Session
from miniclusters.multiplex.state_file import MultiplexState


def progress_text(progress: Progress) -> str:
    beta = f", beta {progress.beta:.3f}" if progress.beta is not None else ""
    rates = ", ".join(f"{s} {r:.1f} it/s" for s, r in sorted(progress.rates.items()))
    return (
        f"[{progress.t:6.1f}s] phase {progress.phase:<8} running {progress.running}, finished {progress.finished}, "
        f"requested {progress.requested_m}m{beta}" + (f" | {rates}" if rates else "")
    )


def print_progress_line(progress: Progress, last: list[str], console: Console | None = None) -> None:
    """Print a line when something other than the rates changed (or every 10 s), to stderr."""
    console = console or Console(stderr=True, highlight=False)
    key = f"{progress.phase} {progress.running} {progress.finished} {progress.requested_m} {progress.beta}"
    if not last or last[0] != key or progress.t - float(last[1]) >= 10:
        console.print(progress_text(progress))
        last[:] = [key, str(progress.t)]


class Summary(TypedDict):
    """The run's closing summary (`minicluster multiplex --json`)."""

    simulations: list[SummaryRow]
    resizes: int
    restarts: int
    same_pids: bool
    beta: float | None
    beta_stderr: float | None
    rates_by_n: dict[str, float]
    requested_m: int | None
    blocked: str | None
    job_shares: str


def summary(session: Session, same_pids: bool) -> Summary:
    planner = session.planner
    sims = summary_rows(planner)
    for row in sims:
        row["job"] = session.simulations.jobs.get(row["sim"], "")
        duty = session.simulations.mean_duty.get(row["sim"])
        row["mean_duty"] = duty
    model = planner.model
    return {
        "simulations": sims,
        "resizes": planner.resizes,
        "restarts": planner.restarts,
        "same_pids": same_pids,
        "beta": model.beta if model else None,
        "beta_stderr": model.beta_stderr if model else None,
        "rates_by_n": {str(n): r[0] for n, r in sorted(planner.rates_by_n.items())},
        "requested_m": planner.planned.total_m if planner.planned else None,
        "blocked": planner.blocked,
        "job_shares": session.shares_note,
    }


def summary_json(session: Session, same_pids: bool) -> str:
    return json.dumps(summary(session, same_pids), default=str)


def print_summary(session: Session, same_pids: bool, console: Console | None = None) -> None:
    data = summary(session, same_pids)
    console = console or Console()
    table = Table(title="Multiplexed simulations")
    why = any(row["reason"] or row["retries"] for row in data["simulations"])
    columns = ("sim", "job", "state", "mean duty", "request m", "makespan s", "iterations") + (("why",) if why else ())
    for col in columns:
        table.add_column(col, justify="left" if col in ("sim", "job", "state", "why") else "right")
    for row in data["simulations"]:
        cells = [
            row["sim"],
            row["job"],
            row["state"],
            f"{row['mean_duty']:.1%}" if row["mean_duty"] is not None else "-",
            str(row["request_m"]),
            f"{row['makespan']:.1f}" if row["makespan"] is not None else "-",
            str(row["iterations"]) if row["iterations"] is not None else "-",
        ]
        if why:
            retried = f"retried {row['retries']}x; " if row["retries"] else ""
            cells.append((retried + (row["reason"] or "")).rstrip("; ") or "-")
        table.add_row(*cells)
    beta = f"{data['beta']:.3f} ± {data['beta_stderr']:.3f}" if data["beta"] is not None else "not fitted"
    table.caption = (
        f"resizes {data['resizes']} (in place: pod pids {'unchanged' if same_pids else 'CHANGED'}), "
        f"pod restarts {data['restarts']}, beta {beta}; {data['job_shares']}"
        + (f"; stopped packing: {data['blocked']}" if data["blocked"] else "")
    )
    console.print(table)


def print_controller_state(state: MultiplexState) -> None:
    """The multiplexing controller's last saved state, for `minicluster status` (whoever started it)."""
    sims = state.get("simulations") or []
    by_state: dict[str, int] = {}
    for sim in sims:
        by_state[sim.get("state", "?")] = by_state.get(sim.get("state", "?"), 0) + 1
    counts = ", ".join(f"{n} {s}" for s, n in sorted(by_state.items())) or "none yet"
    beta = state.get("beta")
    alive = "running" if state.get("running") else "stopped" + (f": {state['stopped']}" if state.get("stopped") else "")
    by = {"up": "started by up", "cli": "minicluster multiplex"}.get(str(state.get("started_by")), "")
    click.echo(
        f"  Multiplexing ({alive}, pid {state.get('controller_pid')}{', ' + by if by else ''}): phase "
        f"{state.get('phase')}, simulations {counts}; requested {state.get('requested_m')}m; resizes "
        f"{state.get('resizes')}, pod restarts {state.get('restarts')}"
        + (f", beta {beta:.3f}" if isinstance(beta, float) else "")
    )
    last = state.get("last_event")
    if isinstance(last, dict):
        words = " ".join(f"{k}={v}" for k, v in last.items() if k not in ("t", "event"))
        click.echo(f"    last event: {last.get('event')} at {last.get('t')}s {words}".rstrip())
    if state.get("blocked"):
        click.echo(f"    stopped packing: {state['blocked']}")
