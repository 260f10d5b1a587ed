"""The autoscaler's timeline PNG: cluster size and queue over time, from its JSON-lines event log."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from elasticity.figures.canvas import StepLine, figure, save, step_panel


# open: the autoscaler's event records, each kind with its own fields (the samples are read)
def plot_autoscale_timeline(events: Iterable[dict[str, Any]], path: Path, title: str = "autoscaling") -> Path:
    samples = [e for e in events if e.get("kind") == "sample"]
    if not samples:
        raise ValueError("the event log has no samples to plot")
    start = samples[0]["time"]
    times = [e["time"] - start for e in samples]
    fig = figure((10, 6))
    top, bottom = fig.subplots(2, 1, sharex=True)

    def series(key: str) -> list[float]:
        return [e[key] for e in samples]

    sizes: list[StepLine] = [
        ("size (pods)", series("size"), {"color": "tab:blue"}),
        ("wanted", series("wanted"), {"color": "tab:orange", "linestyle": "--"}),
        ("busy ranks", series("busy"), {"color": "tab:green", "alpha": 0.7}),
    ]
    step_panel(top, times, sizes, "pods / ranks")
    jobs: list[StepLine] = [
        ("pending jobs", series("pending"), {"color": "tab:red"}),
        ("running jobs", series("running"), {"color": "tab:purple"}),
    ]
    step_panel(bottom, times, jobs, "jobs", "time (s)")
    return save(fig, path, title)
