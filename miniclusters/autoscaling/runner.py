"""Run the autoscaling loop for one cluster until told to stop, the queue is done, or the cluster is gone.

One loop per cluster: a lock file (`<state>/.autoscaler/<name>.lock`, holding the pid) refuses a second writer of
the cluster's size. The event log and the timeline PNG live beside it, so `minicluster up` can start the loop
in the background (spec.autoscale.enabled) and the user finds both afterwards.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from common.tee import Tee
from elasticity.control.autoscale import Autoscaler
from elasticity.control.events import EventLog, read_events
from elasticity.control.ports import ActuatorError
from elasticity.control.timeline import plot_autoscale_timeline
from elasticity.policy.autoscale import AutoscaleOptions
from miniclusters import pidlock
from miniclusters.autoscaling.queue import ExecQueue
from miniclusters.autoscaling.state import AutoscalerState, StepNote, autoscale_dir, save_state, state_file
from miniclusters.backends.base import Backend, BackendError, NotFoundError
from miniclusters.backends.local.state import StateStore
from miniclusters.backends.ports import ports_for

PLOT_EVERY = 10
"""Redraw the timeline every this many steps (and at the end)."""


def lead_event_log(backend: Backend, name: str) -> Path | None:
    """Where the lead's web pages look for this loop's events (`<REST state dir>/controllers/autoscale.jsonl`),
    when that directory is on this machine (a local cluster); None on Kubernetes."""
    if not backend.ephemeral:
        return None
    return StateStore().lead_rest_state_dir(name) / "controllers" / "autoscale.jsonl"


def lock_path(name: str) -> Path:
    return autoscale_dir() / f"{name}.lock"


def _already(name: str) -> str:
    return f"MiniCluster {name!r} is already autoscaled"


def exclusive(name: str) -> contextlib.AbstractContextManager[Path]:
    """Hold ``<state>/.autoscaler/<name>.lock`` (with our pid in it) or raise AlreadyRunning naming the holder."""
    return pidlock.exclusive(lock_path(name), _already(name))


@dataclass
class RunOptions:
    interval: float
    until_idle: bool = False
    timeout: float | None = None
    events: Path | None = None
    plot: Path | None = None
    state: Path | None = None
    """Where `minicluster status` reads the loop's state (miniclusters.autoscaling.state); None: nowhere."""
    started_by: str = "cli"
    """"cli" (`minicluster autoscale`) or "up" (spec.autoscale.enabled), for status."""


class Terminated(KeyboardInterrupt):
    """SIGTERM: stop as for Ctrl-C (undrain, record the state), saying so."""


def _terminate(_signum: int, _frame: object) -> None:
    raise Terminated


class _Status:
    """The loop's state file, rewritten at every step; a no-op without a path."""

    def __init__(self, path: Path | None, name: str, started_by: str, events: Path) -> None:
        self.path, self.name, self.started_by, self.events = path, name, started_by, events
        self.last: tuple[object, float] | None = None

    def write(self, scaler: Autoscaler, running: bool, note: StepNote | None = None) -> None:
        if self.path is None:
            return
        if scaler.last is not None and (self.last is None or self.last[0] is not scaler.last):
            self.last = (scaler.last, time.time())
        # open: the autoscaler's last event line, its fields by kind
        last = None if self.last is None else {**cast(dict[str, object], self.last[0]), "at": self.last[1]}
        fields: AutoscalerState = {
            "cluster": self.name,
            "running": running,
            "started_by": self.started_by,
            "size": scaler.size,
            "draining": sorted(scaler.draining),
            "last_event": last,
            "events": str(self.events),
        }
        if note is not None:  # key by key: a TypedDict takes no other TypedDict's keys in bulk
            if "wanted" in note:
                fields["wanted"] = note["wanted"]
            if "reason" in note:
                fields["reason"] = note["reason"]
            if "stopped" in note:
                fields["stopped"] = note["stopped"]
        with contextlib.suppress(OSError):
            save_state(self.path, fields)


def run_autoscaler(
    backend: Backend,
    queue: ExecQueue,
    name: str,
    options: AutoscaleOptions,
    run: RunOptions,
    say: Callable[[str], None],
) -> str:
    """Loop; returns why it stopped ("idle", "timeout", "gone", "interrupted", "terminated (SIGTERM)").

    The lock is taken before anything else: no second loop looks at the cluster or says it autoscales it."""
    with exclusive(name):
        return _run_holding_the_lock(backend, queue, name, options, run, say)


def _run_holding_the_lock(
    backend: Backend,
    queue: ExecQueue,
    name: str,
    options: AutoscaleOptions,
    run: RunOptions,
    say: Callable[[str], None],
) -> str:
    observer, actuator = ports_for(backend)
    events = run.events or autoscale_dir() / f"{name}.jsonl"
    view = observer.observe(name)
    floor = view.sizes.minimum
    say(
        f"autoscaling {name}: size {view.size} in [{floor}, {view.sizes.maximum}], idle {options.idle_seconds:g}s, "
        f"cool-down {options.cooldown_seconds:g}s, policy {options.policy}; events in {events}"
    )
    deadline = None if run.timeout is None else time.monotonic() + run.timeout
    why = "timeout"
    mirror = lead_event_log(backend, name)
    tee = Tee(events, mirror) if mirror is not None and mirror != events else None
    main = threading.current_thread() is threading.main_thread()
    with tee or contextlib.nullcontext(), EventLog(events if tee is None else tee, "autoscale", time.monotonic) as log:
        previous = signal.signal(signal.SIGTERM, _terminate) if main else None
        scaler = Autoscaler(name, observer, actuator, queue, options, clock=time.monotonic, log=log)
        status = _Status(run.state, name, run.started_by, events)
        status.write(scaler, True)
        steps = 0
        try:
            while deadline is None or time.monotonic() < deadline:
                try:
                    plan = scaler.step().plan
                    status.write(scaler, True, {"wanted": plan.wanted, "reason": plan.reason})
                    if plan.size is not None:
                        say(f"{time.strftime('%H:%M:%S')} {name}: size -> {plan.size} ({plan.reason})")
                    if run.until_idle:
                        state = queue.queue(name)
                        if not state.pending and not state.running and observer.observe(name).size == floor:
                            why = "idle"
                            break
                except NotFoundError:
                    why = "gone"
                    break
                except ActuatorError as exc:  # the lead did not answer this time: try again next step
                    say(f"{time.strftime('%H:%M:%S')} {name}: {exc}")
                steps += 1
                if run.plot and steps % PLOT_EVERY == 0:
                    plot_autoscale_timeline(read_events(events), run.plot, title=f"autoscaling {name}")
                time.sleep(run.interval)
        except Terminated:
            why = "terminated (SIGTERM)"
        except KeyboardInterrupt:
            why = "interrupted"
        finally:
            if main:
                signal.signal(signal.SIGTERM, previous)
            if why != "gone":
                with contextlib.suppress(BackendError, ActuatorError):
                    queue.drain(name, frozenset())  # give back what this loop drained (an operator's stay)
                    scaler.draining = frozenset()
                    scaler.record()
            status.write(scaler, False, {"stopped": why})
    if run.plot:
        plot_autoscale_timeline(read_events(events), run.plot, title=f"autoscaling {name}")
        say(f"wrote {run.plot}")
    return why


def start_in_background(name: str, spec_file: str, backend: str) -> tuple[int, Path, Path]:
    """Start `minicluster autoscale NAME --spec FILE` detached (its own session, output to a log file), holding
    the cluster's lock before this returns (AlreadyRunning when another loop holds it).

    Returns (pid, event log, timeline PNG). The loop ends by itself when the cluster is deleted; a drain it
    leaves behind if killed is undrained by the next loop of the cluster.
    """
    import subprocess
    import sys

    folder = autoscale_dir()
    folder.mkdir(parents=True, exist_ok=True)
    events, png, log = folder / f"{name}.jsonl", folder / f"{name}.png", folder / f"{name}.log"
    program = Path(sys.executable).with_name("minicluster")
    argv = [str(program), "autoscale", name, "--spec", str(Path(spec_file).resolve()), "--backend", backend]
    argv += ["--events", str(events), "--plot", str(png), "--started-by", "up"]
    with open(log, "ab") as out:
        child = pidlock.spawn_holding(
            lock_path(name), _already(name), argv,
            prepare=lambda: state_file(backend, name).unlink(missing_ok=True),  # a previous cluster's loop's
            stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True,
        )  # fmt: skip
    return child.pid, events, png
