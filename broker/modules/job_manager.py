"""job-manager, on the lead (rank 0): submission, the journal, the life cycle, scheduling, exec, output, waits.

Every change to a job is an event (Flux's eventlog names) applied to its JobRecord and appended to the
journal. Events produced while the loop handles one batch of messages are written with a single fsync (group
commit) before any submission among them is acknowledged, so an id the user has seen is always on disk, and
a restarted lead rebuilds every job from the journal (record.replay).

Long waits (job wait, output/eventlog watch, queue idle, annotation wait) are deferred replies: the request is
kept and answered when the job reaches the point asked for, so clients never poll.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from elasticity.policy.queue import Waiting

from ..bootstrap import compress_hosts
from ..jobs.info import job_info
from ..jobs.jobid import FluidGenerator, encode_f58
from ..jobs.jobspec import JobSpec, JobspecError, parse_jobspec
from ..jobs.journal import JobEvent, Journal
from ..jobs.record import JobRecord, replay
from ..jobs.states import ACTIVE, PENDING, JobState
from ..membership import UP
from ..protocol import EINVAL, ENOENT, Message
from ..service import Request, ServiceError
from .mpi import wants_openmpi
from .scheduler import Scheduler

if TYPE_CHECKING:
    from ..broker import Broker

EPERM = 1
EEXIST = 17
ENOSPC = 28
DEFAULT_KILL_GRACE = 5.0
KILLED = signal.SIGKILL  # wait status of a task that died with its broker
LOST_NOTE = "lead broker restarted while the job was running; its tasks were lost"
OUTPUT_CACHE = 256  # inactive jobs whose output stays in memory (the rest is read back from disk)


@dataclass
class Execution:
    """A running job's exec bookkeeping (not journaled: rebuilt as 'lost' after a restart)."""

    spec: JobSpec
    gen: int
    ranks_left: set[int]
    status: int = 0
    started: int = 0
    timers: list[Any] = field(default_factory=list)
    killing: bool = False


@dataclass
class Watch:
    req: Request
    offset: int


class JobManager:
    def __init__(self, broker: Broker) -> None:
        self.b = broker
        statedir = Path(broker.attrs.get("statedir") or f"{broker.rundir}/state")
        self.outdir = statedir / "output"
        self.outdir.mkdir(parents=True, exist_ok=True)
        fsync = broker.attrs.boolean("job-manager.fsync", True)
        self.journal = Journal(statedir / "journal.jsonl", fsync=fsync)
        self.kill_grace = broker.attrs.duration("job-exec.kill-timeout", DEFAULT_KILL_GRACE)
        self.restart_policy = broker.attrs.get("job-manager.restart-policy") or "fail"
        self.sched = Scheduler(broker, broker.attrs.get("sched.queue-policy", "fcfs") or "fcfs")
        self.fluids = FluidGenerator(0, epoch_ms=self._epoch(statedir))
        self.jobs: dict[int, JobRecord] = {}
        self.eventlogs: dict[int, list[JobEvent]] = {}
        self.output: dict[int, list[list[Any]]] = {}
        self.execs: dict[int, Execution] = {}
        self.specs: dict[int, JobSpec] = {}
        self.queue: set[int] = set()  # jobs in SCHED
        self._order: list[int] | None = None  # the queue sorted by priority, then submission
        self.queue_depth = broker.attrs.integer("sched.queue-depth", 256, minimum=1) or 256
        self.active_count = 0
        self.waiters: dict[int, list[Request]] = {}
        self.out_watch: dict[int, list[Watch]] = {}
        self.log_watch: dict[int, list[Watch]] = {}
        self.annot_watch: dict[int, list[tuple[Request, str]]] = {}
        self.idle_watch: list[tuple[Request, str]] = []
        self.buffer: list[JobEvent] = []
        self.acks: list[tuple[Request, dict[str, Any]]] = []
        self.flush_scheduled = False
        self.sched_dirty = False
        self.sched_started = True
        self.sched_reason = ""
        self.submit_enabled = True
        self.submit_reason = ""
        self.orphans: set[int] = set()
        self.last_id = 0
        self.queue_file = statedir / "queue.json"
        self._load_queue_state()
        self._recover()
        for topic, handler in {
            "submit": self.svc_submit,
            "list": self.svc_list,
            "info": self.svc_info,
            "cancel": self.svc_cancel,
            "raise": self.svc_raise,
            "kill": self.svc_kill,
            "wait": self.svc_wait,
            "output": self.svc_output,
            "eventlog": self.svc_eventlog,
            "urgency": self.svc_urgency,
            "queue": self.svc_queue,
            "queue-idle": self.svc_queue_idle,
            "annotate": self.svc_annotate,
            "annotation-wait": self.svc_annotation_wait,
            "stats": self.svc_stats,
            "exec-output": self.svc_exec_output,
            "exec-done": self.svc_exec_done,
        }.items():
            broker.register(f"job-manager.{topic}", handler)
        broker.subscribe("membership.update", self.on_membership)
        broker.on_online(self.kick_sched)
        broker.on_close(self.journal.close)

    # ------------------------------------------------------------------ journal and events
    def _epoch(self, statedir: Path) -> int:
        """FLUIDs count milliseconds from the instance's first start (kept across restarts, like Flux's)."""
        path = statedir / "epoch"
        try:
            return int(path.read_text().strip())
        except (OSError, ValueError):
            epoch = int(self.b.starttime * 1000)
            path.write_text(f"{epoch}\n")
            return epoch

    def _recover(self) -> None:
        events = list(self.journal.events())
        self.jobs = replay(events)
        for event in events:
            if event.jobid in self.jobs:
                self.eventlogs.setdefault(event.jobid, []).append(event)
        self.active_count = sum(1 for r in self.jobs.values() if r.state != JobState.INACTIVE)
        for jobid, record in self.jobs.items():
            self.last_id = max(self.last_id, jobid)
            state = record.state
            if state == JobState.DEPEND:
                self.post(record, "depend")
            if record.state == JobState.PRIORITY:
                self.post(record, "priority", {"priority": self._priority(record.urgency)})
            if record.state == JobState.SCHED:
                self._enqueue(jobid)
            elif record.state == JobState.RUN:
                self.orphans.add(jobid)
                if self.restart_policy == "requeue" or self._requeue_allowed(record):
                    self.post(record, "exception", {"type": "exec", "severity": 1, "note": LOST_NOTE})
                    self.post(record, "requeue", {})
                    self._enqueue(jobid)
                else:
                    self.post(record, "exception", {"type": "exec", "severity": 0, "note": LOST_NOTE})
                    self.post(record, "finish", {"status": KILLED})
                    self._post_release(record)
            elif record.state == JobState.CLEANUP:
                self._post_release(record)
        if self.buffer:
            self.flush()

    def post(self, record: JobRecord, name: str, context: dict[str, Any] | None = None) -> JobEvent:
        event = JobEvent(record.jobid, name, time.time(), context or {})
        record.apply(event)
        self.eventlogs.setdefault(record.jobid, []).append(event)
        self.buffer.append(event)
        self._schedule_flush()
        return event

    def _schedule_flush(self) -> None:
        if not self.flush_scheduled:
            self.flush_scheduled = True
            self.b.loop.call_later(0, self.flush)

    def flush(self) -> None:
        """Group commit: one write + fsync for everything since the last flush, then acknowledge and notify."""
        self.flush_scheduled = False
        events, self.buffer = self.buffer, []
        self.journal.append(*events)
        acks, self.acks = self.acks, []
        for req, payload in acks:
            req.respond(payload)
        touched = {e.jobid for e in events}
        for jobid in touched:
            self._notify_eventlog(jobid)
        for jobid in touched & set(self.annot_watch):
            self._notify_annotations(jobid)
        if self.sched_dirty:
            self.schedule()
        self._check_idle()

    def kick_sched(self) -> None:
        self.sched_dirty = True
        self._schedule_flush()

    def _priority(self, urgency: int) -> int:
        """Flux's default priority plugin: priority = urgency, 0 = held, 31 = expedite (highest)."""
        return 2**32 - 1 if urgency == 31 else urgency

    def _requeue_allowed(self, record: JobRecord) -> bool:
        system = record.jobspec.get("attributes", {}).get("system", {})
        return str(system.get("requeue", "")).lower() in ("1", "true", "yes", "on")

    def _record(self, req: Request) -> JobRecord:
        jobid = req.get("id", int)
        record = self.jobs.get(jobid)
        if record is None:
            raise ServiceError(ENOENT, f"{encode_f58(jobid)}: unknown job id")
        return record

    def _spec(self, record: JobRecord) -> JobSpec:
        spec = self.specs.get(record.jobid)
        if spec is None:
            spec = self.specs[record.jobid] = parse_jobspec(record.jobspec)
        return spec

    # ------------------------------------------------------------------ submission
    def svc_submit(self, req: Request) -> None:
        if not self.submit_enabled:
            raise ServiceError(EPERM, f"job submission is disabled: {self.submit_reason or 'queue disabled'}")
        jobspec = req.get("jobspec", dict)
        urgency = req.get("urgency", int, required=False, default=16)
        if not 0 <= urgency <= 31:
            raise ServiceError(EINVAL, f"urgency: must be between 0 and 31 (got {urgency})")
        try:
            spec = parse_jobspec(jobspec)
        except JobspecError as exc:
            raise ServiceError(EINVAL, f"invalid jobspec: {exc}") from None
        reason = self.sched.unsatisfiable(spec.resources)
        if reason is not None:
            raise ServiceError(ENOSPC, f"unsatisfiable request: {reason}")
        jobid = self.fluids.next(self.last_id)
        self.last_id = jobid
        userid = req.get("userid", int, required=False, default=os.getuid())
        record = JobRecord(jobid=jobid, jobspec=jobspec, userid=userid, urgency=urgency, t_submit=time.time())
        self.jobs[jobid] = record
        self.active_count += 1
        self.specs[jobid] = spec
        context = {"jobspec": jobspec, "userid": userid, "urgency": urgency, "flags": req.payload.get("flags", 0)}
        event = JobEvent(jobid, "submit", record.t_submit, context)
        record.apply(event)
        self.eventlogs[jobid] = [event]
        self.buffer.append(event)
        self.post(record, "depend")
        self.post(record, "priority", {"priority": self._priority(urgency)})
        self._enqueue(jobid)
        self.sched_dirty = True
        self.acks.append((req, {"id": jobid}))
        self._schedule_flush()
        return None

    # ------------------------------------------------------------------ scheduling
    def schedule(self) -> None:
        self.sched_dirty = False
        if not self.sched_started or not self.queue or not self.b.online:
            return
        if self._order is None or len(self._order) > 2 * len(self.queue) + 64:
            self._order = sorted(self.queue, key=lambda j: (-self.jobs[j].priority, j))
        self._order = (
            [j for j in self._order if j in self.queue] if len(self._order) != len(self.queue) else self._order
        )
        # Like Flux's queue-depth: only the head of the queue is considered in one pass (FCFS can start at
        # most one job per free core; EASY looks further for backfill candidates).
        free_cores = sum(len(n.cores) for n in self.sched.nodes().values() if n.up)
        depth = self.queue_depth if self.sched.policy == "easy" else min(self.queue_depth, free_cores + 1)
        waiting = []
        for jobid in self._order:
            record = self.jobs[jobid]
            if record.priority <= 0:
                continue  # held
            spec = self._spec(record)
            waiting.append(Waiting(jobid, spec.resources, spec.duration))
            if len(waiting) >= depth:
                break
        if not waiting:
            return
        running = [
            (jobid, self.jobs[jobid].cores, self.jobs[jobid].t_run, ex.spec.duration)
            for jobid, ex in self.execs.items()
        ]
        for jobid, allocation in self.sched.plan(waiting, running).start:
            self._start(self.jobs[jobid], allocation)

    def _enqueue(self, jobid: int) -> None:
        self.queue.add(jobid)
        self._order = None

    def _start(self, record: JobRecord, allocation: dict[int, list[int]]) -> None:
        self.queue.discard(record.jobid)
        ranks = sorted(allocation)
        self.post(record, "alloc", {"ranks": ranks, "cores": {str(r): allocation[r] for r in ranks}})
        spec = self._spec(record)
        counts = self._task_counts(spec, allocation)
        hostnames = self.b.config.hostnames
        launch = "tasks"
        if spec.command[:2] == ["flux", "broker"]:
            launch = "broker"
        elif wants_openmpi(spec.shell_options):
            launch = "mpi"
        system = record.jobspec.get("attributes", {}).get("system", {})
        common = {
            "command": spec.command,
            "userid": record.userid,
            "env": spec.environment,
            "cwd": spec.cwd,
            "size": spec.resources.ntasks,
            "nnodes": len(ranks),
            "launch": launch,
            "hosts": [[hostnames[r], counts[r]] for r in ranks],
            "ranks": ranks,
            "cores": {str(r): allocation[r] for r in ranks},
            "batch": system.get("batch", {}),
            "level": int(self.b.attrs.get("instance-level") or 0),
            "mpirun_args": spec.shell_options.get("mpirun-args", []),
            "shell_options": spec.shell_options,
        }
        targets = ranks[:1] if launch == "mpi" else ranks
        ex = Execution(spec=spec, gen=record.requeues, ranks_left=set(targets))
        self.execs[record.jobid] = ex
        first = 0
        for rank in ranks:
            taskranks = list(range(first, first + counts[rank]))
            first += counts[rank]
            if rank not in targets:
                continue
            if launch == "broker":
                taskranks = [ranks.index(rank)]
            payload = {"id": record.jobid, "gen": ex.gen, "spec": common, "tasks": taskranks}
            self.b.rpc("job-exec.start", payload, rank, self._on_started(record.jobid, rank))
        if spec.duration > 0:
            ex.timers.append(self.b.loop.call_later(spec.duration, lambda: self._expire(record.jobid, ex.gen)))

    def _task_counts(self, spec: JobSpec, allocation: dict[int, list[int]]) -> dict[int, int]:
        request = spec.resources
        ranks = sorted(allocation)
        if request.nnodes is not None:
            shares = sorted(request.tasks_per_node(), reverse=True)
            return {rank: shares[i] for i, rank in enumerate(ranks)}
        return {rank: len(allocation[rank]) // request.cores_per_task for rank in ranks}

    def _on_started(self, jobid: int, rank: int) -> Callable[[Message], None]:
        return lambda msg: self._started(jobid, rank, msg)

    def _started(self, jobid: int, rank: int, msg: Message) -> None:
        ex = self.execs.get(jobid)
        record = self.jobs[jobid]
        if ex is None or ex.gen != record.requeues:
            return
        if msg.errnum:
            note = f"rank {rank} ({self.b.config.hostnames[rank]}): exec failed: {msg.errstr}"
            self._exception(record, "exec", note)
            self._rank_done(record, ex, rank, 1 << 8)
            return
        ex.started += 1
        if ex.started == 1:
            self.post(record, "start", {})

    # ------------------------------------------------------------------ exec reports
    def svc_exec_output(self, req: Request) -> dict[str, Any]:
        jobid = req.get("id", int)
        record = self.jobs.get(jobid)
        if record is not None and req.payload.get("gen", 0) == record.requeues:
            self._add_output(jobid, req.get("lines", list))
        return {}

    def svc_exec_done(self, req: Request) -> dict[str, Any]:
        jobid = req.get("id", int)
        record = self.jobs.get(jobid)
        ex = self.execs.get(jobid)
        if record is None or ex is None or req.payload.get("gen", 0) != ex.gen:
            return {}
        lines = req.get("lines", list, required=False, default=[])
        if lines:
            self._add_output(jobid, lines)
        self._rank_done(record, ex, req.get("rank", int), req.get("status", int))
        return {}

    def _add_output(self, jobid: int, lines: list[list[Any]]) -> None:
        self.output.setdefault(jobid, []).extend(lines)
        self._notify_output(jobid)

    def _rank_done(self, record: JobRecord, ex: Execution, rank: int, status: int) -> None:
        if rank not in ex.ranks_left:
            return
        ex.ranks_left.discard(rank)
        ex.status = max(ex.status, status)
        if ex.ranks_left:
            if status != 0 and not ex.killing and len(record.ranks) > 1:
                self._kill(record, ex, signal.SIGTERM)  # one rank failed: the job is over everywhere
            return
        self._complete(record, ex)

    def _complete(self, record: JobRecord, ex: Execution) -> None:
        for timer in ex.timers:
            timer.cancel()
        del self.execs[record.jobid]
        if len(record.ranks) > 1 and ex.killing:
            for rank in record.ranks:  # stray orteds and late tasks
                self.b.rpc("job-exec.kill", {"id": record.jobid, "signal": signal.SIGKILL}, rank, _ignore)
        self.post(record, "finish", {"status": ex.status})
        self._post_release(record)

    def _post_release(self, record: JobRecord) -> None:
        self.post(record, "release", {"ranks": list(record.ranks), "final": True})
        self.post(record, "clean")
        self.sched_dirty = True
        self._inactive(record)

    def _inactive(self, record: JobRecord) -> None:
        self.active_count -= 1
        self.specs.pop(record.jobid, None)
        info = self._info(record)
        for req in self.waiters.pop(record.jobid, []):
            req.respond(info)
        self._save_output(record.jobid)
        self._notify_output(record.jobid)
        for req, _key in self.annot_watch.pop(record.jobid, []):
            req.respond({"annotations": dict(record.extra), "state": record.state.name})

    def _save_output(self, jobid: int) -> None:
        lines = self.output.get(jobid, [])
        path = self.outdir / f"{jobid}.json"
        if lines:
            record = self.jobs[jobid]
            path.write_text(json.dumps(lines))
            self._copy_to_files(record, lines)
        inactive = [j for j in self.output if self.jobs[j].state == JobState.INACTIVE]
        for old in inactive[: max(0, len(inactive) - OUTPUT_CACHE)]:
            del self.output[old]

    def _copy_to_files(self, record: JobRecord, lines: list[list[Any]]) -> None:
        """--output/--error files, written by the lead when the job ends ({{id}} expands as in Flux)."""
        files = record.jobspec.get("attributes", {}).get("system", {}).get("shell", {}).get("options", {})
        output = files.get("output", {}) if isinstance(files, dict) else {}
        targets: dict[str, str] = {}
        for stream in ("stdout", "stderr"):
            path = output.get(stream, {}).get("path") if isinstance(output.get(stream), dict) else None
            if path:
                targets[stream] = path.replace("{{id}}", encode_f58(record.jobid)).replace(
                    "{{jobid}}", encode_f58(record.jobid)
                )
        if "stdout" in targets and "stderr" not in targets:
            targets["stderr"] = targets["stdout"]
        handles: dict[str, Any] = {}
        try:
            for path in targets.values():
                if path not in handles:
                    handles[path] = open(path, "w", encoding="utf-8")  # noqa: SIM115
            for stream, _task, text in lines:
                if stream in targets:
                    handles[targets[stream]].write(text)
        except OSError as exc:
            print(f"flux-job-manager: {encode_f58(record.jobid)}: cannot write output: {exc}", flush=True)
        finally:
            for handle in handles.values():
                handle.close()

    def _lines(self, jobid: int) -> list[list[Any]]:
        if jobid in self.output:
            return self.output[jobid]
        path = self.outdir / f"{jobid}.json"
        if self.jobs[jobid].state == JobState.INACTIVE and path.exists():
            lines: list[list[Any]] = json.loads(path.read_text())
            return lines
        return []

    # ------------------------------------------------------------------ exceptions, cancel, timeout, kill
    def _exception(self, record: JobRecord, kind: str, note: str, severity: int = 0) -> None:
        was_pending = bool(record.state & PENDING)
        self.post(record, "exception", {"type": kind, "severity": severity, "note": note, "userid": os.getuid()})
        if severity != 0:
            return
        if was_pending:  # never started: nothing to kill
            self.queue.discard(record.jobid)
            self.post(record, "clean")
            self.sched_dirty = True
            self._inactive(record)
            return
        ex = self.execs.get(record.jobid)
        if ex is not None and not ex.killing:
            self._kill(record, ex, signal.SIGTERM)

    def _kill(self, record: JobRecord, ex: Execution, signum: int) -> None:
        ex.killing = True
        payload = {"id": record.jobid, "signal": int(signum), "grace": self.kill_grace}
        for rank in record.ranks:
            self.b.rpc("job-exec.kill", payload, rank, _ignore)

    def _expire(self, jobid: int, gen: int) -> None:
        record = self.jobs[jobid]
        if jobid in self.execs and record.requeues == gen and record.state == JobState.RUN:
            self._exception(record, "timeout", "resource allocation expired")

    def svc_cancel(self, req: Request) -> dict[str, Any]:
        record = self._record(req)
        if record.state == JobState.INACTIVE or (record.state == JobState.CLEANUP and record.jobid not in self.execs):
            raise ServiceError(EINVAL, f"{encode_f58(record.jobid)}: job is inactive")
        note = req.get("note", str, required=False, default="")
        self._exception(record, "cancel", note or "canceled by user")
        return {}

    def svc_raise(self, req: Request) -> dict[str, Any]:
        record = self._record(req)
        if record.state == JobState.INACTIVE:
            raise ServiceError(EINVAL, f"{encode_f58(record.jobid)}: job is inactive")
        kind = req.get("type", str)
        self._exception(record, kind, req.get("note", str, required=False, default=""), req.get("severity", int))
        return {}

    def svc_kill(self, req: Request) -> dict[str, Any]:
        record = self._record(req)
        if record.jobid not in self.execs:
            raise ServiceError(EINVAL, f"{encode_f58(record.jobid)}: job is not running")
        signum = req.get("signal", int, required=False, default=int(signal.SIGTERM))
        for rank in record.ranks:
            self.b.rpc("job-exec.kill", {"id": record.jobid, "signal": signum, "grace": 1e9}, rank, _ignore)
        return {}

    # ------------------------------------------------------------------ lost ranks, elastic growth
    def on_membership(self, msg: Message) -> None:
        ranks = msg.payload.get("ranks", {})
        for key, state in ranks.items():
            rank = int(key)
            if state == UP:
                for jobid in self.orphans:
                    self.b.rpc("job-exec.kill", {"id": jobid, "signal": int(signal.SIGKILL)}, rank, _ignore)
                continue
            for jobid, ex in list(self.execs.items()):
                record = self.jobs[jobid]
                if rank not in record.ranks:
                    continue
                host = self.b.config.hostnames[rank]
                note = f"lost contact with broker rank {rank} ({host}): it is {state}"
                if self._requeue_allowed(record):
                    self.post(record, "exception", {"type": "node-failure", "severity": 1, "note": note})
                    self._kill(record, ex, signal.SIGKILL)
                    for timer in ex.timers:
                        timer.cancel()
                    del self.execs[jobid]
                    self.post(record, "requeue", {"note": note})
                    self._enqueue(jobid)
                else:
                    self._exception(record, "node-failure", note)
                    self._rank_done(record, ex, rank, KILLED)
        self.kick_sched()

    # ------------------------------------------------------------------ queries
    def _info(self, record: JobRecord) -> dict[str, Any]:
        hostnames = self.b.config.hostnames
        nodelist = compress_hosts([hostnames[r] for r in record.ranks if r < len(hostnames)]) if record.ranks else ""
        try:
            ntasks = self._spec(record).resources.ntasks if record.state != JobState.INACTIVE else -1
        except JobspecError:
            ntasks = 1
        if ntasks < 0:
            tasks = record.jobspec.get("tasks", [{}])[0].get("count", {})
            resources = record.jobspec.get("resources", [{}])[0]
            ntasks = int(tasks.get("total", 0)) or _slots(resources)
        return job_info(record, nodelist, ntasks)

    def svc_list(self, req: Request) -> dict[str, Any]:
        mask = req.get("states", int, required=False, default=int(ACTIVE | JobState.INACTIVE))
        count = req.get("max_entries", int, required=False, default=0)
        userid = req.get("userid", int, required=False, default=-1)
        ids = req.get("ids", list, required=False, default=None)
        records = [self.jobs[i] for i in ids if i in self.jobs] if ids is not None else list(self.jobs.values())
        chosen = [r for r in records if r.state & mask and (userid < 0 or r.userid == userid)]
        pending = sorted((r for r in chosen if r.state & ACTIVE and not r.t_run), key=lambda r: (-r.priority, r.jobid))
        running = sorted((r for r in chosen if r.state & ACTIVE and r.t_run), key=lambda r: -r.t_run)
        done = sorted((r for r in chosen if r.state == JobState.INACTIVE), key=lambda r: -r.t_inactive)
        ordered = [*pending, *running, *done]
        if count > 0:
            ordered = ordered[:count]
        return {"jobs": [self._info(r) for r in ordered]}

    def svc_info(self, req: Request) -> dict[str, Any]:
        record = self._record(req)
        info = self._info(record)
        if req.payload.get("jobspec"):
            info["jobspec"] = record.jobspec
        return info

    def svc_stats(self, req: Request) -> dict[str, Any]:
        counts = {str(state.name).lower(): 0 for state in JobState}
        for record in self.jobs.values():
            counts[str(record.state.name).lower()] += 1
        return {"states": counts, "queue_length": len(self.queue), "running": len(self.execs)}

    def svc_wait(self, req: Request) -> None:
        record = self._record(req)
        if record.state == JobState.INACTIVE:
            req.respond(self._info(record))
        else:
            self.waiters.setdefault(record.jobid, []).append(req)
        return None

    def svc_output(self, req: Request) -> None:
        record = self._record(req)
        offset = req.get("offset", int, required=False, default=0)
        self.out_watch.setdefault(record.jobid, []).append(Watch(req, offset))
        self._notify_output(record.jobid)
        return None

    def _notify_output(self, jobid: int) -> None:
        watches = self.out_watch.get(jobid)
        if not watches:
            return
        record = self.jobs[jobid]
        lines = self._lines(jobid)
        eof = record.state == JobState.INACTIVE
        keep: list[Watch] = []
        for watch in watches:
            if watch.offset < len(lines) or eof or not watch.req.payload.get("wait", False):
                payload: dict[str, Any] = {"lines": lines[watch.offset :], "offset": len(lines), "eof": eof}
                if eof:
                    payload["info"] = self._info(record)
                watch.req.respond(payload)
            else:
                keep.append(watch)
        if keep:
            self.out_watch[jobid] = keep
        else:
            del self.out_watch[jobid]

    def svc_eventlog(self, req: Request) -> None:
        record = self._record(req)
        offset = req.get("offset", int, required=False, default=0)
        self.log_watch.setdefault(record.jobid, []).append(Watch(req, offset))
        self._notify_eventlog(record.jobid)
        return None

    def _notify_eventlog(self, jobid: int) -> None:
        watches = self.log_watch.get(jobid)
        if not watches:
            return
        events = self.eventlogs.get(jobid, [])
        flushed = len(events) - sum(1 for e in self.buffer if e.jobid == jobid)
        eof = self.jobs[jobid].state == JobState.INACTIVE
        keep: list[Watch] = []
        for watch in watches:
            if watch.offset < flushed or eof or not watch.req.payload.get("wait", False):
                chunk = [
                    {"timestamp": e.timestamp, "name": e.name, "context": e.context}
                    for e in events[watch.offset : flushed]
                ]
                watch.req.respond({"events": chunk, "offset": flushed, "eof": eof and flushed == len(events)})
            else:
                keep.append(watch)
        if keep:
            self.log_watch[jobid] = keep
        else:
            del self.log_watch[jobid]

    def svc_urgency(self, req: Request) -> dict[str, Any]:
        record = self._record(req)
        urgency = req.get("urgency", int)
        if not 0 <= urgency <= 31:
            raise ServiceError(EINVAL, f"urgency: must be between 0 and 31 (got {urgency})")
        if not record.state & (JobState.DEPEND | JobState.PRIORITY | JobState.SCHED):
            raise ServiceError(EINVAL, f"{encode_f58(record.jobid)}: urgency cannot be changed once running")
        old = record.urgency
        self.post(record, "urgency", {"urgency": urgency})
        self.post(record, "priority", {"priority": self._priority(urgency)})
        self._order = None
        self.kick_sched()
        return {"old_urgency": old}

    # ------------------------------------------------------------------ annotations (sub-instance URIs)
    def svc_annotate(self, req: Request) -> dict[str, Any]:
        record = self._record(req)
        annotations = req.get("annotations", dict)
        self.post(record, "annotate", annotations)
        return {}

    def svc_annotation_wait(self, req: Request) -> None:
        record = self._record(req)
        key = req.get("key", str)
        if key in record.extra or record.state == JobState.INACTIVE:
            req.respond({"annotations": dict(record.extra), "state": record.state.name})
        else:
            self.annot_watch.setdefault(record.jobid, []).append((req, key))
        return None

    def _notify_annotations(self, jobid: int) -> None:
        record = self.jobs[jobid]
        keep = []
        for req, key in self.annot_watch.pop(jobid, []):
            if key in record.extra:
                req.respond({"annotations": dict(record.extra), "state": record.state.name})
            else:
                keep.append((req, key))
        if keep:
            self.annot_watch[jobid] = keep

    # ------------------------------------------------------------------ queue control
    def _load_queue_state(self) -> None:
        """A stopped or disabled queue stays so across a lead restart (as in Flux)."""
        try:
            state = json.loads(self.queue_file.read_text())
        except (OSError, ValueError):
            return
        self.sched_started = bool(state.get("started", True))
        self.sched_reason = str(state.get("stop_reason", ""))
        self.submit_enabled = bool(state.get("enabled", True))
        self.submit_reason = str(state.get("enable_reason", ""))
        with contextlib.suppress(ValueError):
            self.sched = Scheduler(self.b, str(state.get("policy", self.sched.policy)))

    def _save_queue_state(self) -> None:
        state = {
            "started": self.sched_started,
            "stop_reason": self.sched_reason,
            "enabled": self.submit_enabled,
            "enable_reason": self.submit_reason,
            "policy": self.sched.policy,
        }
        tmp = self.queue_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state))
        os.replace(tmp, self.queue_file)

    def svc_queue(self, req: Request) -> dict[str, Any]:
        action = req.get("action", str, required=False, default="status")
        reason = req.get("reason", str, required=False, default="")
        if action == "start":
            self.sched_started, self.sched_reason = True, ""
            self.kick_sched()
        elif action == "stop":
            self.sched_started, self.sched_reason = False, reason
        elif action == "enable":
            self.submit_enabled, self.submit_reason = True, ""
        elif action == "disable":
            self.submit_enabled, self.submit_reason = False, reason
        elif action == "policy":
            try:
                self.sched = Scheduler(self.b, reason)
            except ValueError as exc:
                raise ServiceError(EINVAL, str(exc)) from None
            self.kick_sched()
        elif action != "status":
            raise ServiceError(EINVAL, f"unknown queue action {action!r}")
        if action != "status":
            self._save_queue_state()
        return {
            "enabled": self.submit_enabled,
            "enable_reason": self.submit_reason,
            "started": self.sched_started,
            "stop_reason": self.sched_reason,
            "policy": self.sched.policy,
            "pending": len(self.queue),
            "running": len(self.execs),
        }

    def svc_queue_idle(self, req: Request) -> None:
        mode = req.get("mode", str, required=False, default="idle")
        self.idle_watch.append((req, mode))
        self._check_idle()
        return None

    def _check_idle(self) -> None:
        if not self.idle_watch:
            return
        active = self.active_count
        keep = []
        for req, mode in self.idle_watch:
            done = not self.execs if mode == "idle" else active == 0
            if done:
                req.respond({"pending": len(self.queue), "running": len(self.execs)})
            else:
                keep.append((req, mode))
        self.idle_watch = keep


def _slots(resource: dict[str, Any]) -> int:
    count = resource.get("count", 1)
    count = count if isinstance(count, int) else 1
    if resource.get("type") == "node":
        inner = resource.get("with", [{}])[0]
        return count * _slots(inner)
    return count


def _ignore(_msg: Message) -> None:
    """Fire-and-forget: kills and reports whose answers nobody needs."""


def job_manager(broker: Broker) -> None:
    """Module entry point: the job manager runs on the lead only."""
    if broker.rank == 0:
        JobManager(broker)
