"""The cluster page's figures, drawn by the existing pure plotting functions and cached as PNGs.

Controller timelines: by convention each controller writes its JSON-lines event log to
`<REST state dir>/controllers/<name>.jsonl` (autoscale, multiplex, campaign). The last duty-cycle profile: the newest
job that ran with `-o pmpi`, whose traces are where the job shell put them (`pmpi-dir`, else `<cwd>/pmpi-<id>`).
A PNG is redrawn only when its source changed; matplotlib is not thread-safe, so one figure is drawn at a time.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from broker.jobs.api import JobInfo

if TYPE_CHECKING:
    from broker.jobs.shapes import ShellOptions
    from elasticity.control.events import EventRecord
    from elasticity.profiling.duty_cycle import DutyCycleAnalysis

CONTROLLERS = ("multiplex", "autoscale", "campaign")
PROFILE_SCAN = 50  # newest jobs looked at for traces
_draw_lock = threading.Lock()


def controller_log(state_dir: Path, name: str) -> Path:
    return state_dir / "controllers" / f"{name}.jsonl"


def figure_dir(state_dir: Path) -> Path:
    return state_dir / "web-figures"


def _fresh(png: Path, sources: Iterable[Path]) -> bool:
    try:
        made = png.stat().st_mtime
        return all(source.stat().st_mtime <= made for source in sources)
    except OSError:
        return False


def draw_once(png: Path, sources: list[Path], draw: Callable[[Path], object]) -> Path:
    """`png`, redrawn by `draw` if any source is newer (written aside, then renamed: readers never see half)."""
    with _draw_lock:
        if not _fresh(png, sources):
            png.parent.mkdir(parents=True, exist_ok=True)
            partial = png.with_suffix(".partial.png")
            draw(partial)
            partial.replace(png)
    return png


def controller_figure(state_dir: Path, name: str) -> Path | None:
    """The controller's timeline PNG, or None while it has written no event log (or nothing to plot yet)."""
    from elasticity.control.events import read_events

    log = controller_log(state_dir, name)
    if name not in CONTROLLERS or not log.is_file():
        return None

    def draw(path: Path) -> None:
        events = list(read_events(log))
        if name == "autoscale":
            from elasticity.control.timeline import plot_autoscale_timeline

            plot_autoscale_timeline(events, path, title="autoscaling")
        elif name == "campaign":
            from elasticity.figures.campaign import plot_campaign_timeline

            plot_campaign_timeline(events, path, title="campaign")
        else:
            from elasticity.figures.timeline import write_timeline

            starts = [e for e in events if (e.get("kind") or e.get("event")) == "controller-start"]
            allocatable = starts[-1].get("allocatable_m") if starts else None
            write_timeline([dict(e) for e in events], path, int(allocatable) if allocatable else None)

    try:
        return draw_once(figure_dir(state_dir) / f"{name}.png", [log], draw)
    except (ValueError, KeyError, TypeError):  # an event log without samples yet, or from an older writer
        return None
    except ModuleNotFoundError:  # a pod given the broker bundle without its extras (no matplotlib): no figure
        return None


def last_event(state_dir: Path, name: str) -> EventRecord | None:
    """The controller's last event record (the page shows its kind, cluster and time)."""
    from elasticity.control.events import read_events

    log = controller_log(state_dir, name)
    if not log.is_file():
        return None
    last = None
    for last in read_events(log):  # noqa: B007 - the last record is the one wanted
        pass
    return cast("EventRecord | None", last)  # where the record enters: the page reads its header


@dataclass(frozen=True)
class Profile:
    job: JobInfo
    directory: Path
    ranks: list[tuple[int, str, float]]  # (rank, hostname, steady duty cycle)
    figure: Path


TraceDir = Callable[[JobInfo], tuple[Path, str | None] | None]
"""Where a job's PMPI traces are and the MPI call that ended its iterations, if it was profiled."""


def latest_profile(state_dir: Path, jobs: Iterable[JobInfo], trace_dir: TraceDir) -> Profile | None:
    """The newest profiled job with traces on disk, its duty cycles and figure (cached). A running job counts
    once its ranks wrote their traces (`-o pmpi=K` writes them after K iterations, as multiplexing does)."""
    try:
        from elasticity.profiling.duty_cycle import DEFAULT_BOUNDARY_CALL as DEFAULT_BOUNDARY
        from elasticity.profiling.profile import profile_traces
        from elasticity.profiling.report import write_figure
        from elasticity.profiling.trace import find_trace_files
    except ModuleNotFoundError:  # a pod given the broker bundle without its extras (numpy, matplotlib)
        return None

    for job in list(jobs)[:PROFILE_SCAN]:
        found = trace_dir(job)
        if found is None or not found[0].is_dir():
            continue
        directory, boundary = found
        traces = find_trace_files(directory, str(job.id)).get(str(job.id), [])
        if not traces:
            continue
        try:
            analysis = profile_traces(directory, jobid=str(job.id), boundary_call=boundary or DEFAULT_BOUNDARY).analysis
        except (ValueError, OSError):
            continue  # traces being written, or cut short (the job was killed mid-write): look further back
        png = figure_dir(state_dir) / f"profile-{job.id}.png"
        title = f"duty cycles of {job.f58}"

        def draw(path: Path, analysis: DutyCycleAnalysis = analysis, title: str = title) -> None:
            write_figure(analysis, path, title=title)

        draw_once(png, traces, draw)
        ranks = [(r.rank, r.hostname, float(r.steady_duty)) for r in analysis.ranks]
        return Profile(job, directory, ranks, png)
    return None


def broker_trace_dir(service: Any) -> TraceDir:
    """Trace directories as the job shell chose them, from each job's jobspec (built-in broker)."""
    from broker.client import FluxError
    from broker.modules.pmpi import pmpi_settings
    from broker.service import ServiceError

    cache: dict[int, tuple[Path, str | None] | None] = {}

    def find(job: JobInfo) -> tuple[Path, str | None] | None:
        if job.id not in cache:
            client = getattr(service, "client", None)
            if client is None:
                return None
            try:
                spec = client.jobspec(job.id)
                options = spec.get("attributes", {}).get("system", {}).get("shell", {}).get("options", {})
                shell = cast("ShellOptions", options) if isinstance(options, dict) else {}  # checked where read
                settings = pmpi_settings(shell, job.id, job.cwd or "/")
            except (FluxError, ServiceError, OSError, ValueError):
                settings = None
            # no directory: `-o mpi-wait` alone, which traces nothing (Path(None) raised here before)
            cache[job.id] = (Path(settings["dir"]), settings["boundary"]) if settings and settings["dir"] else None
        return cache[job.id]

    return find
