"""Event-driven replay of a workload through a scheduling policy (the same functions the live loops call).

Events are job completions and arrivals. All events at one time are handled together, completions before
arrivals, and then the policy is asked once, through `plan_pass` (policy/scheduling/actions.py, the live
malleable loop's path too): shrinks first, then starts, then expands; a decision that breaks a rule raises
:class:`PolicyError`.

A resized job keeps the work it has done: progress is a fraction of the whole job, made at the rate the
speedup model gives for its current size; a resize costs ``rescale_overhead`` seconds without progress, and a
start ``start_overhead`` (a live run's launch: 0 for a trace replay).
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

from elasticity.policy.scheduling.actions import PolicyError, plan_pass
from elasticity.policy.scheduling.registry import SchedulingPolicy
from elasticity.policy.scheduling.types import RunningJob, Snapshot, WaitingJob
from elasticity.sim.workload import SimJob, Workload

_COMPLETION, _ARRIVAL = 0, 1


@dataclass(frozen=True, slots=True)
class JobRecord:
    job: int
    """The workload's job number (SWF field 1)."""
    submit: float
    start: float
    end: float
    nodes: int
    """Final size."""
    pref: int
    priority: int
    node_seconds: float
    expands: int
    shrinks: int
    malleable: bool


@dataclass(frozen=True)
class SimResult:
    workload: str
    policy: str
    nodes: int
    records: tuple[JobRecord, ...]
    busy: tuple[tuple[float, int], ...]
    """(time, nodes busy from then on), one entry per change."""
    notes: tuple[str, ...] = ()


@dataclass(slots=True)
class _Job:
    spec: SimJob
    nodes: int = 0
    start: float = math.nan
    end: float = math.nan
    done: float = 0.0
    since: float = 0.0
    rate: float = 0.0
    version: int = 0
    expands: int = 0
    shrinks: int = 0
    last_resize: float = -math.inf
    node_seconds: float = 0.0
    used_since: float = 0.0
    ratio: float = 1.0
    waiting_view: WaitingJob | None = None
    view: RunningJob | None = field(default=None)


def _runtime(job: SimJob, nodes: int) -> float:
    if nodes == job.size.pref:
        return job.runtime
    return job.model.runtime(job.runtime, job.size.pref, nodes)


def _place(job: _Job, index: int, now: float, nodes: int, rescale_overhead: float, start_overhead: float) -> RunningJob:
    """Run (or resize) `job` on `nodes` from `now`: its progress so far is banked, its end recomputed; returns
    the view the policy sees (the caller files it as running and queues the completion)."""
    spec = job.spec
    if job.nodes:
        job.node_seconds += job.nodes * (now - job.used_since)
        if now > job.since:
            job.done = min(1.0, job.done + (now - job.since) * job.rate)
        job.since = max(now, job.since) + rescale_overhead
    else:
        job.since = now + start_overhead
    job.used_since = now
    job.nodes = nodes
    job.version += 1
    length = _runtime(spec, nodes)
    if length <= 0:
        job.rate = math.inf
        job.end = job.since
        expected = job.since
    else:
        job.rate = 1.0 / length
        remaining = (1.0 - job.done) * length
        job.end = job.since + remaining
        expected = job.since + remaining * job.ratio
    job.view = RunningJob(index, nodes, spec.size, expected, spec.priority, job.last_resize)
    return job.view


def simulate(
    workload: Workload,
    policy: SchedulingPolicy,
    *,
    policy_name: str = "policy",
    rescale_overhead: float = 0.0,
    start_overhead: float = 0.0,
) -> SimResult:
    machine = workload.nodes
    jobs = [_Job(spec, ratio=(spec.estimate / spec.runtime if spec.runtime > 0 else 1.0)) for spec in workload.jobs]
    events: list[tuple[float, int, int, int]] = []
    for index, spec in enumerate(workload.jobs):
        if spec.size.max > machine:
            raise ValueError(f"job {spec.job} can grow to {spec.size.max} nodes; the machine has {machine}")
        events.append((spec.submit, _ARRIVAL, index, 0))
    heapq.heapify(events)
    waiting: dict[int, WaitingJob] = {}
    running: dict[int, RunningJob] = {}
    free = machine
    busy: list[tuple[float, int]] = [(0.0, 0)]
    done: list[int] = []
    elastic = any(spec.size.malleable for spec in workload.jobs)

    def place(index: int, now: float, nodes: int) -> None:
        running[index] = _place(jobs[index], index, now, nodes, rescale_overhead, start_overhead)
        heapq.heappush(events, (jobs[index].end, _COMPLETION, index, jobs[index].version))

    while events:
        now = events[0][0]
        changed = False
        while events and events[0][0] == now:
            _, kind, index, version = heapq.heappop(events)
            job = jobs[index]
            if kind == _ARRIVAL:
                spec = job.spec
                job.waiting_view = WaitingJob(index, spec.submit, spec.size, spec.estimate, spec.priority)
                waiting[index] = job.waiting_view
                changed = True
            elif version == job.version and index in running:
                job.node_seconds += job.nodes * (now - job.used_since)
                free += job.nodes
                job.end = now
                del running[index]
                done.append(index)
                changed = True
        if not changed or (not waiting and not (elastic and _any_malleable(running))):
            if changed:
                busy.append((now, machine - free))
            continue
        actions = plan_pass(
            policy, Snapshot(now, machine, tuple(running.values()), tuple(waiting.values())), policy_name
        )
        for resize in actions.shrinks:
            free += running[resize.job].nodes - resize.nodes
            jobs[resize.job].shrinks += 1
            jobs[resize.job].last_resize = now
            place(resize.job, now, resize.nodes)
        for start in actions.starts:
            del waiting[start.job]
            free -= start.nodes
            jobs[start.job].start = now
            jobs[start.job].last_resize = now
            place(start.job, now, start.nodes)
        for resize in actions.expands:
            free -= resize.nodes - running[resize.job].nodes
            jobs[resize.job].expands += 1
            jobs[resize.job].last_resize = now
            place(resize.job, now, resize.nodes)
        if busy[-1][0] == now:
            busy[-1] = (now, machine - free)
        else:
            busy.append((now, machine - free))

    if waiting:
        raise PolicyError(
            f"{policy_name}: {len(waiting)} jobs never started (first: {jobs[next(iter(waiting))].spec.job})"
        )
    records = tuple(
        JobRecord(
            job.spec.job,
            job.spec.submit,
            job.start,
            job.end,
            job.nodes,
            job.spec.size.pref,
            job.spec.priority,
            job.node_seconds,
            job.expands,
            job.shrinks,
            job.spec.size.malleable,
        )
        for job in jobs
    )
    return SimResult(workload.name, policy_name, machine, records, tuple(busy), workload.notes)


def _any_malleable(running: dict[int, RunningJob]) -> bool:
    """A pass with nothing waiting can still expand malleable jobs into freed nodes."""
    return any(view.size.malleable for view in running.values())
