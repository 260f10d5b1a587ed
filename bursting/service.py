"""The burst service: observe the lead's queue and ranks, decide (policy.py), act through a plugin.

One `step()` is observe -> decide -> act; `run()` repeats it. The lead is reached through `LeadPort` (the broker's
RPCs over its local socket: jobs, resources, burst-register/-release, annotate); bursts live in a small JSON state
file so `minicluster status` and `minicluster burst` see the same ones. Plugin failures (credentials,
reachability) become the job's pending reason (`sched.reason_pending`, shown by `flux jobs`), never a crash.
The service tells the lead its own state (reporter.py): running, or failed and why, so a service that cannot
start, keeps failing or was killed is shown as such, and the jobs it would have burst for say so.

    python -m bursting.service --cluster NAME --uri local://.../local --state bursts.json [--idle 30]
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path

from broker.burst_service import FAILED, RUNNING, STOPPED
from broker.fsd import parse_fsd
from bursting.lead import HandleLead, LeadPort, NodesView
from bursting.plugin import Burst, BurstError, BurstPlugin, Verdict
from bursting.policy import (
    ACTIVE_STATES,
    ActiveBurst,
    BurstNeed,
    QueuedJob,
    Selector,
    burst_name,
    burst_needs,
    first_able,
    idle_marks,
    refusal,
    to_tear_down,
)
from bursting.reporter import STALE_AFTER, Reporter
from bursting.state_file import BurstRecord, BurstState, StateFile

DEFAULT_IDLE_PERIOD = 30.0
DEFAULT_INTERVAL = 1.0
JOIN_TIMEOUT = 180.0
"""A burst whose brokers have not all joined the lead by then has failed (unreachable lead, pods that never ran)."""
GIVE_UP_REPORT_TIMEOUT = 120.0
"""How long a service that cannot start keeps trying to tell the lead why (the lead may still be starting)."""
STOP_REPORT_TIMEOUT = 3.0


class BurstRefused(BurstError):
    """A burst asked for by hand that its plugin says it cannot bring (over its limit, no quota, ...)."""


class UnknownBurst(BurstError, LookupError):
    """A burst name that is not one of the cluster's bursts."""


class BurstService:
    """Observe -> decide -> act, once per `step()`."""

    def __init__(
        self,
        cluster: str,
        lead: LeadPort,
        plugins: Mapping[str, BurstPlugin],
        state: StateFile,
        selector: Selector = first_able,
        idle_period: float = DEFAULT_IDLE_PERIOD,
        clock: Callable[[], float] = time.time,
        log: Callable[[str], None] = lambda text: print(text, file=sys.stderr, flush=True),
    ) -> None:
        self.cluster = cluster
        self.lead = lead
        self.plugins = dict(plugins)
        self.state = state
        self.selector = selector
        self.idle_period = idle_period
        self.clock = clock
        self.log = log

    # ------------------------------------------------------------------ the loop
    def step(self) -> None:
        jobs = self.lead.jobs()
        nodes = self.lead.nodes()
        now = self.clock()
        with self.state.update() as state:
            self._mark_up(state, nodes, now)
            self._mark_idle(state, jobs, now)
            present = nodes.up + len(nodes.burst_ranks_up)
            for name in to_tear_down(self._active(state), jobs, now, self.idle_period, present, nodes.cores_per_node):
                self._tear_down(state, name)
            bursting = sum(b.nodes for b in state.bursts.values() if b.state == "launching")
            failed = {b.job for b in state.bursts.values() if b.state == "failed"}  # retried once it is removed
            retry = [j for j in jobs if j.id not in failed]
            needs = burst_needs(retry, nodes.up + len(nodes.burst_ranks_up), bursting, nodes.cores_per_node)
            for need in needs:
                self._burst_for(state, need.job, need.nodes)
            self._clear_reasons(state, jobs)

    def run(
        self,
        interval: float = DEFAULT_INTERVAL,
        stop: Callable[[], bool] = lambda: False,
        on_state: Callable[[str, str], None] = lambda state, reason: None,
    ) -> None:
        """Step until `stop`; `on_state` hears whether steps work (running) or fail (failed, and why)."""
        while not stop():
            try:
                self.step()
                on_state(RUNNING, "")
            except (ConnectionError, TimeoutError) as exc:
                self.log(f"burst service: cannot reach the lead: {exc}")
            except Exception as exc:  # a bug, or a plugin letting something out: said, and tried again next time
                reason = f"its last step failed: {type(exc).__name__}: {exc}"
                self.log(f"burst service: {reason}\n{traceback.format_exc()}")
                on_state(FAILED, reason)
            time.sleep(interval)

    # ------------------------------------------------------------------ acting
    def burst(self, plugin_name: str, nodes: int, job: int | None = None, manual: bool = False) -> BurstRecord:
        """Bring up `nodes` followers with one plugin, by hand (`minicluster burst`): within the same limit the
        loop asks the plugin about (`can_satisfy`), else BurstRefused saying why."""
        plugin = self.plugins.get(plugin_name)
        if plugin is not None:
            try:
                verdict = plugin.can_satisfy(nodes)
            except Exception as exc:  # as in the loop: a plugin's bug or an unreachable API is a reason
                raise BurstError(f"{plugin_name}: {type(exc).__name__}: {exc}") from None
            if not verdict.ok:
                raise BurstRefused(f"{plugin_name}: {verdict.reason or 'declined'}")
        with self.state.update() as state:
            return self._launch(state, plugin_name, nodes, job, manual)

    def release(self, name: str) -> None:
        """Tear one burst down; UnknownBurst (naming those there are) when there is no such burst."""
        with self.state.update() as state:
            record = state.bursts.get(name)
            if record is None or record.state == "released":
                known = ", ".join(sorted(n for n, b in state.bursts.items() if b.state != "released")) or "none"
                raise UnknownBurst(f"no burst {name!r} of {self.cluster} (its bursts: {known})")
            self._tear_down(state, name)

    def _burst_for(self, state: BurstState, job: int, nodes: int) -> None:
        verdicts: dict[str, Verdict] = {}
        for name, plugin in self.plugins.items():
            try:
                verdicts[name] = plugin.can_satisfy(nodes)
            except Exception as exc:  # a plugin's bug or an unreachable API: a reason, never a crash
                verdicts[name] = Verdict(False, f"{type(exc).__name__}: {exc}")
        chosen = self.selector(BurstNeed(job, nodes), verdicts)
        if chosen is None or chosen not in self.plugins:
            self._pending(state, job, f"burst of {nodes} node(s) not possible: {refusal(verdicts)}")
            return
        record = self._launch(state, chosen, nodes, job, manual=False)
        if record.state == "failed":
            self._pending(state, job, f"burst {record.name} ({chosen}) failed: {record.reason}")
        else:
            self._pending(state, job, f"waiting for burst {record.name}: {nodes} node(s) via {chosen}")

    def _launch(self, state: BurstState, plugin_name: str, nodes: int, job: int | None, manual: bool) -> BurstRecord:
        plugin = self.plugins.get(plugin_name)
        if plugin is None:
            raise BurstError(f"no burst plugin {plugin_name!r} (installed: {', '.join(self.plugins) or 'none'})")
        name = burst_name(self.cluster, [b.name for b in state.bursts.values() if b.state != "released"])
        probe = Burst(name, nodes, plugin_name)
        record = BurstRecord(name, nodes, plugin_name, [], [], job=job, manual=manual, launched_at=self.clock())
        state.bursts[name] = record
        try:
            address, port = plugin.expose(probe)
            ranks, hostnames = self.lead.register(probe.prefix, list(probe.hosts))
            record.ranks = ranks
            record.lead_hosts = [h for h in hostnames if not h.startswith(probe.prefix)]
            record.lead_address, record.lead_port = address, port
            plugin.launch(record.burst())
            self.log(f"burst {name}: {nodes} node(s) via {plugin_name} (ranks {ranks}), lead at {address}:{port}")
        except Exception as exc:  # credentials, reachability, quota: the reason is kept and shown
            record.state, record.reason = "failed", str(exc) or type(exc).__name__
            self.log(f"burst {name} via {plugin_name} failed: {record.reason}")
            self._undo(record, plugin)
        return record

    def _undo(self, record: BurstRecord, plugin: BurstPlugin) -> None:
        with contextlib.suppress(Exception):
            plugin.teardown(record.burst())
        if record.ranks:
            with contextlib.suppress(Exception):
                self.lead.release(record.name + "-")

    def _tear_down(self, state: BurstState, name: str) -> None:
        record = state.bursts.get(name)
        if record is None or record.state == "released":
            return
        plugin = self.plugins.get(record.plugin)
        try:
            self.lead.release(record.burst().prefix)
            if plugin is not None:
                plugin.teardown(record.burst())
        except Exception as exc:
            record.reason = f"teardown failed (retrying): {exc}"
            self.log(f"burst {name}: {record.reason}")
            return
        self.log(f"burst {name}: torn down")
        del state.bursts[name]

    # ------------------------------------------------------------------ bookkeeping
    def _active(self, state: BurstState) -> list[ActiveBurst]:
        return [
            ActiveBurst(b.name, b.nodes, tuple(b.ranks), b.idle_since)
            for b in state.bursts.values()
            if (b.state in ("up", "failed") and (b.used or not b.manual)) or b.state == "failed"
        ]

    def _mark_up(self, state: BurstState, nodes: NodesView, now: float) -> None:
        for record in state.bursts.values():
            if record.state == "launching" and record.ranks and set(record.ranks) <= nodes.burst_ranks_up:
                record.state = "up"
            elif record.state == "up" and not set(record.ranks) <= nodes.burst_ranks_up:
                # a broker of the burst died or left: the lead fails its jobs ("lost contact with broker rank N");
                # the burst is broken, and goes as failed bursts go (once no job holds its ranks)
                gone = sorted(set(record.ranks) - nodes.burst_ranks_up)
                record.state = "failed"
                record.reason = f"its broker rank(s) {', '.join(map(str, gone))} left the lead (lost or down)"
                self.log(f"burst {record.name}: {record.reason}")
            elif record.state == "launching" and now - record.launched_at > JOIN_TIMEOUT:
                record.state = "failed"
                record.reason = f"its brokers did not join the lead within {JOIN_TIMEOUT:.0f} s"
                if record.job is not None:
                    self._pending(state, record.job, f"burst {record.name} ({record.plugin}) failed: {record.reason}")

    def _mark_idle(self, state: BurstState, jobs: list[QueuedJob], now: float) -> None:
        busy = {r for job in jobs if job.state in ACTIVE_STATES for r in job.ranks}
        for record in state.bursts.values():
            record.used = record.used or any(r in busy for r in record.ranks)
        for burst in idle_marks(self._active(state), jobs, now):
            state.bursts[burst.name].idle_since = burst.idle_since
        for record in state.bursts.values():
            if record.state == "failed" and record.idle_since is None:
                record.idle_since = now

    def _pending(self, state: BurstState, job: int, reason: str) -> None:
        if state.pending.get(str(job)) != reason:
            state.pending[str(job)] = reason
            with contextlib.suppress(Exception):
                self.lead.annotate(job, reason)

    def _clear_reasons(self, state: BurstState, jobs: list[QueuedJob]) -> None:
        waiting = {str(j.id) for j in jobs if j.state in ("DEPEND", "PRIORITY", "SCHED")}
        for key in [k for k in state.pending if k not in waiting]:
            del state.pending[key]


def main(argv: list[str] | None = None) -> int:
    """The service as a process. Whatever stops it (a bad option, a plugin that does not load, a signal) is told
    to the lead before it exits, so `minicluster status`, /cluster and the pending jobs say so."""
    from bursting.discovery import load_selector, plugin_factories
    from bursting.plugin import LeadContext

    parser = argparse.ArgumentParser(prog="python -m bursting.service", description=__doc__.splitlines()[0])
    parser.add_argument("--cluster", required=True)
    parser.add_argument("--uri", required=True, help="the lead broker's local:// URI")
    parser.add_argument("--state", required=True, type=Path, help="the bursts' JSON state file")
    parser.add_argument("--context", type=Path, help="a JSON file with the LeadContext")
    parser.add_argument("--spec", type=Path, help="instead of --context: the MiniCluster as JSON (in a pod)")
    parser.add_argument("--certificate", type=Path, help="with --spec: the instance's CURVE certificate")
    parser.add_argument("--plugins", default="", help="comma-separated plugin names (default: every installed)")
    parser.add_argument("--selector", default=None, help="module:function choosing a plugin")
    parser.add_argument("--idle", default=str(DEFAULT_IDLE_PERIOD), help="idle time before teardown (5s, 2m, ...)")
    parser.add_argument("--interval", default=str(DEFAULT_INTERVAL), help="time between steps (1s, 500ms, ...)")
    args = parser.parse_args(argv)
    try:
        alone: int | str | OSError = single_instance(args.state)
    except OSError as exc:
        alone = exc
    if isinstance(alone, str):  # another service runs: the lead's report is its, so nothing is told the lead
        print(f"burst service: {alone}", file=sys.stderr, flush=True)
        return 1
    lead_side = HandleLead(args.uri)  # used by the reporter's thread only (a handle is one thread's)
    reporter = Reporter(lambda state, reason: lead_side.report(state, reason, os.getpid(), STALE_AFTER))

    def give_up(reason: str, code: int) -> int:
        print(f"burst service: {reason}", file=sys.stderr, flush=True)
        reporter.stop(FAILED, reason, timeout=GIVE_UP_REPORT_TIMEOUT)
        return code

    if isinstance(alone, OSError):
        return give_up(f"cannot hold its lock beside {args.state}: {alone}", 2)
    try:
        idle, interval = _duration("--idle", args.idle), _duration("--interval", args.interval)
        if interval <= 0 or interval == float("inf"):
            raise ValueError(f"--interval {args.interval!r}: must be a finite duration above 0")
        if args.context is not None:
            context = LeadContext(**json.loads(args.context.read_text()))
        elif args.spec is not None and args.certificate is not None:
            context = LeadContext(args.cluster, json.loads(args.spec.read_text()), args.certificate.read_text())
        else:
            raise ValueError("give --context, or --spec and --certificate")
        selector = load_selector(args.selector)
    except (OSError, ValueError, TypeError) as exc:
        return give_up(str(exc), 2)
    try:
        factories = plugin_factories([p for p in args.plugins.split(",") if p] or None)
        plugins = {name: factory(context) for name, factory in factories.items()}
    except Exception as exc:  # a plugin not installed, or one that cannot start here: the lead hears why
        return give_up(f"cannot load its plugins: {exc}", 1)
    stopping: list[str] = []

    def stop(signum: int, _frame: object) -> None:
        stopping.append(signal.Signals(signum).name)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    reporter.start()
    service = BurstService(args.cluster, HandleLead(args.uri), plugins, StateFile(args.state), selector, idle)
    service.run(interval, stop=lambda: bool(stopping), on_state=reporter.set)
    reporter.stop(STOPPED, f"stopped by {stopping[0]}", timeout=STOP_REPORT_TIMEOUT)
    return 0


def single_instance(state: Path) -> int | str:
    """Hold `<state>.service.lock` (flock, our pid in it) for the process's life: the descriptor; or, when another
    service holds it, why we may not run. Two services of one cluster would both burst for the same job; the
    lock is taken before anything is told the lead. The kernel lets go when the process ends (never deleted)."""
    path = state.with_suffix(".service.lock")
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(handle)
        try:
            pid = path.read_text().strip() or "?"
        except OSError:
            pid = "?"
        return f"another burst service serves these bursts: pid {pid} (lock {path})"
    os.ftruncate(handle, 0)
    os.pwrite(handle, str(os.getpid()).encode(), 0)
    return handle


def _duration(flag: str, text: str) -> float:
    """Seconds from a Flux Standard Duration (`30`, `30s`, `2m`); ValueError naming the flag."""
    try:
        seconds = parse_fsd(text)
    except ValueError as exc:
        raise ValueError(f"{flag}: {exc}") from None
    return seconds


if __name__ == "__main__":
    sys.exit(main())
