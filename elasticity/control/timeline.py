"""The autoscaler's timeline PNG: cluster size and queue over time, from its JSON-lines event log."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any


def plot_autoscale_timeline(events: Iterable[dict[str, Any]], path: Path, title: str = "autoscaling") -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    samples = [e for e in events if e.get("kind") == "sample"]
    if not samples:
        raise ValueError("the event log has no samples to plot")
    start = samples[0]["time"]
    times = [e["time"] - start for e in samples]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
    top.step(times, [e["size"] for e in samples], where="post", label="size (pods)", color="tab:blue")
    top.step(times, [e["wanted"] for e in samples], where="post", label="wanted", color="tab:orange", linestyle="--")
    top.step(times, [e["busy"] for e in samples], where="post", label="busy ranks", color="tab:green", alpha=0.7)
    top.set_ylabel("pods / ranks")
    top.legend(loc="upper right")
    top.grid(alpha=0.3)
    bottom.step(times, [e["pending"] for e in samples], where="post", label="pending jobs", color="tab:red")
    bottom.step(times, [e["running"] for e in samples], where="post", label="running jobs", color="tab:purple")
    bottom.set_ylabel("jobs")
    bottom.set_xlabel("time (s)")
    bottom.legend(loc="upper right")
    bottom.grid(alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
