"""`minicluster multiplex`: several simulations on one MiniCluster's pods at nearly full throughput."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import click

from elasticity.pmpi.env import SPIN_US_MAX
from miniclusters.backends.base import NotFoundError
from miniclusters.cli.arguments import command_text, source_of
from miniclusters.cli.backend_options import backend_errors, backend_options, open_backend
from miniclusters.words import plural

if TYPE_CHECKING:
    from miniclusters.multiplex.settings import MultiplexSettings


class _Stop:
    """SIGTERM (`minicluster down`) asks the loop to stop between two steps, never in the middle of one (a
    submission half done would leave a job nobody cancels)."""

    def __init__(self) -> None:
        self.why: str | None = None

    def __call__(self, _signum: int, _frame: Any) -> None:
        self.why = "the controller was stopped (SIGTERM, e.g. minicluster down)"


@contextlib.contextmanager
def _lock(backend: str, name: str) -> Iterator[None]:
    """One controller per cluster on this machine, local or podman (the lock `minicluster down` finds it by; a
    podman cluster's controller took none, so down did not stop it and a second could start); Kubernetes clusters
    are guarded by their operator instead (spec.multiplexing)."""
    if backend == "kubernetes":
        yield
        return
    from miniclusters.multiplex.background import exclusive

    with exclusive(name):
        yield


def _spec_defaults(backend: Any, name: str) -> MultiplexSettings:
    """spec.multiplexing, spec.tasks and the runner's CPU request of a cluster on this machine (local: its store's
    spec file; podman: the spec its record keeps); the Kubernetes path takes flags only."""
    from miniclusters.multiplex.settings import runner_cpu_m

    store = getattr(backend, "store", None)
    if store is None:
        return {}
    try:
        whole = store.load_spec(name) if hasattr(store, "load_spec") else backend.stored_spec(name)
        spec = whole.get("spec", {})
    except (OSError, ValueError, KeyError, AttributeError):
        return {}
    mux = cast("MultiplexSettings", dict(spec.get("multiplexing") or {}))  # the stored spec: validated when it was
    mux["podCpuM"] = runner_cpu_m(whole)  # the rigid allocation profiling starts from
    mux.setdefault("tasks", spec.get("tasks", 1))
    mux["flavour"] = (spec.get("flux") or {}).get("flavour") or "builtin"
    mux["placementCpus"] = (spec.get("placement") or {}).get("cpus") or "shared"
    return mux


def _write_timeline(log_path: Path, timeline: Path, allocatable_m: int) -> None:
    from elasticity.control.events import read_events
    from elasticity.figures.timeline import write_timeline

    write_timeline(list(read_events(log_path)), timeline, allocatable_m)


def _claimed_workdir(name: str, flag: str | None, configured: str | None) -> Path:
    """--workdir, else spec.multiplexing.workdir, else a temporary directory: checked to be ours and marked before
    the controller writes there (miniclusters/workdirs.py); one that is not is a usage error naming its source."""
    from miniclusters.api.errors import SpecError
    from miniclusters.workdirs import claim

    field = "--workdir" if flag else "spec.multiplexing.workdir"
    chosen = flag or configured
    path = Path(chosen) if chosen else Path(tempfile.mkdtemp(prefix=f"mc-mux-{name}-"))
    if chosen and not chosen.startswith("/"):
        path = Path.cwd() / chosen  # a relative --workdir names a directory here
    try:
        claim(path, field, name, "multiplex", ours=not chosen)
    except SpecError as exc:
        raise click.UsageError("; ".join(str(p) for p in exc.problems)) from None
    return path


@click.command()
@click.argument("name")
@click.option(
    "--command",
    "command",
    callback=command_text,
    help="The simulation: MPI program and arguments (default: spec.multiplexing).",
)
@click.option("--max", "max_n", type=click.IntRange(min=1), help="Most simulations at once [spec or 4].")
@click.option("--total", type=click.IntRange(min=1), help="Simulations to run in all [--max].")
@click.option("--ranks", type=click.IntRange(min=1), help="MPI ranks per simulation [spec.tasks].")
@click.option("--profile-iterations", type=click.IntRange(min=1), help="Iterations profiled with PMPI [50].")
@click.option(
    "--profile-together",
    type=click.IntRange(min=1),
    help="Simulations started at once and profiled side by side, splitting the rigid CPU (at most --max) [1].",
)
@click.option("--fairness", type=click.FloatRange(min=1.0), help="Largest fastest/slowest progress ratio [1.10].")
@click.option(
    "--efficiency", type=click.FloatRange(min=0.01, max=1.0), help="Theta(N)/N the next simulation must keep [0.85]."
)
@click.option("--headroom", type=click.FloatRange(min=0.01), help="Request = duty x allocation x headroom [1.2].")
@click.option("--pod-overhead", default="200m", show_default=True, help="Added to every pod's request for its broker.")
@click.option(
    "--equal-cpu",
    help="CPU per rank before profiling [the spec's CPU request per pod, less --pod-overhead, shared by the ranks].",
)
@click.option("--allocatable", help="The nodes' CPU for these pods [this machine's CPUs on local and podman].")
@click.option("--boundary", help="MPI call that ends an iteration [MPI_Barrier].")
@click.option(
    "--mpi-wait",
    type=click.Choice(["sleep", "poll"]),
    default="sleep",
    show_default=True,
    help="How the simulations' ranks wait in MPI: sleep (what they do not use goes to the others) or Open MPI's "
    "polling (for solvers synchronising every few microseconds, where a wake-up costs more than the wait).",
)
@click.option(
    "--mpi-spin-us",
    type=click.IntRange(min=0, max=SPIN_US_MAX),
    help="With --mpi-wait sleep: microseconds a waiting rank polls before its first nap (MC_MPI_WAIT_SPIN_US) "
    "[the library's 20]. Waits shorter than this never pay a wake-up.",
)
@click.option("--interval", default=1.0, show_default=True, type=click.FloatRange(min=0.05), help="Seconds per step.")
@click.option("--fairness-interval", default=5.0, show_default=True, type=click.FloatRange(min=0.1))
@click.option(
    "--settle",
    default=3.0,
    show_default=True,
    type=click.FloatRange(min=0.1),
    help="Seconds rates need after a change.",
)
@click.option("--start-timeout", default=60.0, show_default=True, type=click.FloatRange(min=1), help="Seconds.")
@click.option(
    "--retries",
    default=2,
    show_default=True,
    type=click.IntRange(min=0),
    help="Resubmit a simulation that failed because a pod was lost at most this often.",
)
@click.option("--timeout", type=click.FloatRange(min=1), help="Give up (cancelling what runs) after this long.")
@click.option("--workdir", type=click.Path(file_okay=False), help="Output and traces (shared with the pods).")
@click.option("--timeline", type=click.Path(dir_okay=False), help="PNG timeline; the JSON-lines log goes beside it.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as one JSON object.")
@click.option("--started-by", default="cli", hidden=True, help="Who started it (`up` passes 'up'), for status.")
@backend_options
def multiplex(name: str, backend: str, context: str | None, namespace: str | None, **opts: Any) -> None:
    """Profile, resize in place, pack more simulations and keep them fair on MiniCluster NAME.

    \b
    Example:
      minicluster up examples/multiplex.yaml --detach
      minicluster multiplex multiplex --max 3 --timeline mux.png
    """
    from elasticity.control.multiplex import all_done
    from elasticity.control.multiplex_runner import MultiplexRunner
    from elasticity.model.resources import cpu_millicores
    from miniclusters.multiplex.event_mirror import MirroredEventLog, mirror_for
    from miniclusters.multiplex.report import print_progress_line, print_summary, summary_json
    from miniclusters.multiplex.session import open_session, save_state
    from miniclusters.multiplex.settings import multiplex_config
    from miniclusters.multiplex.state_file import state_file

    if opts["mpi_spin_us"] is not None and opts["mpi_wait"] != "sleep":
        raise click.UsageError("--mpi-spin-us: only with --mpi-wait sleep (polling never naps)")
    with backend_errors(), _lock(backend, name):  # before anything is looked at, claimed or said
        target = open_backend(backend, context, namespace)
        status = target.status(name)
        spec = _spec_defaults(target, name)
        command = opts["command"] or spec.get("command") or ""
        if not command.strip():
            raise click.UsageError("--command is required (or spec.multiplexing.command)")
        try:
            equal = cpu_millicores(opts["equal_cpu"]) if opts["equal_cpu"] else None
            allocatable = cpu_millicores(opts["allocatable"]) if opts["allocatable"] else None
            overhead = cpu_millicores(opts["pod_overhead"])
        except ValueError as exc:
            raise click.BadParameter(str(exc)) from None
        if allocatable is None:
            if not target.ephemeral:  # local and podman pods share this machine's CPUs
                raise click.UsageError("--allocatable is required on Kubernetes (the nodes' CPU for these pods)")
            allocatable = (len(os.sched_getaffinity(0)) or 1) * 1000
        flags = {"max": opts["max_n"], "total": opts["total"], "ranks": opts["ranks"],
                 "profileIterations": opts["profile_iterations"],
                 "profileTogether": opts["profile_together"], "fairness": opts["fairness"],
                 "efficiencyThreshold": opts["efficiency"], "headroom": opts["headroom"]}  # fmt: skip
        mux = cast("MultiplexSettings", {**spec, **{k: v for k, v in flags.items() if v is not None}})
        max_n = int(mux.get("max") or 4)
        if int(mux.get("total") or max_n) < max_n:
            total_from = source_of("total", "--total", flags, "spec.multiplexing", spec)
            max_from = source_of("max", "--max", flags, "spec.multiplexing", spec)
            raise click.UsageError(f"{total_from} {mux['total']} is below {max_from} {max_n}")
        if int(mux.get("profileTogether") or 1) > max_n:
            together_from = source_of("profileTogether", "--profile-together", flags, "spec.multiplexing", spec)
            max_from = source_of("max", "--max", flags, "spec.multiplexing", spec)
            raise click.UsageError(f"{together_from} {mux['profileTogether']} is above {max_from} {max_n}")
        try:
            config = multiplex_config(
                status, mux, int(spec.get("tasks") or 0), allocatable, overhead_m=overhead, equal_m=equal,
                fairness_interval=opts["fairness_interval"], start_timeout=opts["start_timeout"],
                settle=opts["settle"], retries=opts["retries"],
            )  # fmt: skip
        except ValueError as exc:
            raise click.BadParameter(str(exc)) from None
        workdir = _claimed_workdir(name, opts["workdir"], spec.get("workdir"))
        boundary = opts["boundary"] or spec.get("boundary") or "MPI_Barrier"
        session = open_session(
            target, backend, name, command, config, workdir, boundary, opts["mpi_wait"], opts["mpi_spin_us"]
        )
        session.started_by = opts["started_by"]
        timeline = Path(opts["timeline"]) if opts["timeline"] else workdir / "timeline.png"
        log_path = timeline.with_suffix(".jsonl")
        if log_path.exists():
            log_path.unlink()
        started = time.monotonic()
        clock = lambda: time.monotonic() - started  # noqa: E731
        state_path = state_file(backend, name)
        mirror = mirror_for(target, backend, name, str(spec.get("flavour") or "builtin"))
        click.echo(
            f"multiplexing {name}: {plural(config.ranks, 'rank')} per simulation on "
            f"{plural(len(config.pods), 'pod')}, "
            f"allocatable {allocatable}m, up to {config.max_simulations} at once ({config.total} in all); "
            f"{session.shares_note}; work directory {workdir}",
            err=True,
        )
        with MirroredEventLog(log_path, "multiplex", clock, mirror) as log:
            runner = MultiplexRunner(
                name, session.planner, session.observer, session.actuator, session.simulations,
                session.shares, clock=time.monotonic, log=log,
            )  # fmt: skip
            last: list[str] = []

            def on_progress(progress: Any) -> None:
                print_progress_line(progress, last)
                log.flush_mirror()
                save_state(state_path, name, session, True)

            runner.on_progress = on_progress
            stop = _Stop()
            previous = signal.signal(signal.SIGTERM, stop)  # `minicluster down` stops us this way
            try:
                runner.run(interval=opts["interval"], timeout=opts["timeout"], stopping=lambda: stop.why)
            except NotFoundError:
                runner.stop("cancelled", "the cluster is gone")
                save_state(state_path, name, session, False, {"stopped": "the cluster is gone"})
                click.echo(f"MiniCluster {name} is gone: the controller stops", err=True)
                sys.exit(0 if all_done(session.planner) else 1)
            except KeyboardInterrupt:
                stop.why = "interrupted"
                runner.stop("cancelled", "interrupted")
            finally:
                signal.signal(signal.SIGTERM, previous)
                log.flush_mirror()
        if stop.why is not None:
            save_state(state_path, name, session, False, {"stopped": stop.why})
            _write_timeline(log_path, timeline, allocatable)
            click.echo("interrupted: running simulations cancelled", err=True)
            sys.exit(130)
        identity_now = session.identity(name) if session.identity else {}
        same_pids = all(identity_now.get(i) == ident for i, ident in session.pod_identity.items())
        save_state(state_path, name, session, False, {"same_pids": same_pids})
        _write_timeline(log_path, timeline, allocatable)
        click.echo(f"timeline written to {timeline} (events: {log_path})", err=True)
        if opts["as_json"]:
            click.echo(summary_json(session, same_pids))
        else:
            print_summary(session, same_pids)
        sys.exit(0 if all_done(session.planner) else 1)  # any simulation not done: non-zero
