"""Executions: starting jobs on their ranks, their output, exceptions and kills, completion, requeues, and jobs
on ranks that are lost or return."""

from __future__ import annotations

import os
import shlex
import signal
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from ...jobs.jobid import encode_f58
from ...jobs.jobspec import JobSpec
from ...jobs.record import JobRecord
from ...jobs.states import PENDING, JobState
from ...loop import Timer
from ...membership import UP
from ...payloads import Empty
from ...port import BrokerPort
from ...protocol import EHOSTUNREACH, EINVAL, ETIMEDOUT, Message
from ...service import Request, ServiceError
from ..exec_request import ExecRequest, Launch, LocalExecStart
from ..mpi import wants_openmpi
from .outputs import JobOutputs
from .replies import KillRequest
from .roles import Allocation, Holding, OutputLine, QueueRole, SaverRole, WatchesRole
from .table import JobTable

DEFAULT_KILL_GRACE = 5.0
KILLED = signal.SIGKILL  # wait status of a task that died with its broker
SIGNAL_ANSWER_TIMEOUT = 2.0
"""Seconds a rank has to answer a job's signal before it is asked again. A broker killed a moment ago may still
look connected to its parent's socket: the request is queued to it and lost with the connection, and no answer
would ever come. Asked again, the rank is known gone by then (EHOSTUNREACH) or answers."""


@dataclass
class Execution:
    """A running job's exec bookkeeping (not journaled: rebuilt as 'lost' after a restart)."""

    spec: JobSpec
    gen: int
    ranks_left: set[int]
    status: int = 0
    started: int = 0
    timers: list[Timer] = field(default_factory=list)
    killing: bool = False


class Executions:
    """Running jobs, their output (outputs.JobOutputs), and jobs a lead restart left running on ranks (orphans)."""

    def __init__(
        self, port: BrokerPort, table: JobTable, queue: QueueRole, watches: WatchesRole, saver: SaverRole
    ) -> None:
        self._port = port
        self._table = table
        self._queue = queue
        self._watches = watches
        self._saver = saver
        self._kill_grace = port.attrs.duration("job-exec.kill-timeout", DEFAULT_KILL_GRACE)
        self._execs: dict[int, Execution] = {}
        self._outputs = JobOutputs(table, watches, self.exception)
        self._orphans: set[int] = set()

    # ------------------------------------------------------------------ what others read
    def count(self) -> int:
        return len(self._execs)

    def running(self) -> list[int]:
        """The running jobs' ids (a copy: callers may requeue them as they go)."""
        return list(self._execs)

    def is_running(self, jobid: int) -> bool:
        return jobid in self._execs

    def holding(self) -> list[Holding]:
        """(jobid, allocation, t_run, duration) of every job holding resources."""
        table = self._table
        return [(jobid, table[jobid].cores, table[jobid].t_run, ex.spec.duration) for jobid, ex in self._execs.items()]

    def lines(self, jobid: int) -> list[OutputLine]:
        """A job's output so far (read back from disk once it is out of the cache)."""
        return self._outputs.lines(jobid)

    def adopt_orphan(self, jobid: int) -> None:
        """A job the lead ran before it restarted: its tasks are killed on any rank that comes back."""
        self._orphans.add(jobid)

    # ------------------------------------------------------------------ starting
    def start(self, record: JobRecord, allocation: Allocation) -> None:
        table = self._table
        if self._queue.take_drain_note(record.jobid):  # no longer waiting for drained ranks
            table.post(record, "annotate", {"sched": {"reason_pending": ""}})
        ranks = sorted(allocation)
        table.post(record, "alloc", {"ranks": ranks, "cores": {str(r): allocation[r] for r in ranks}})
        spec = table.spec(record)
        counts = _task_counts(spec, allocation)
        hostnames = self._port.hostnames
        options = spec.shell_options  # a property walking the attributes: read once
        launch: Launch = "tasks"
        if spec.command[:2] == ["flux", "broker"]:
            launch = "broker"
        elif wants_openmpi(options):
            launch = "mpi"
        system = record.jobspec.get("attributes", {}).get("system", {})
        batch = system.get("batch")
        script = batch.get("script") if isinstance(batch, dict) else None
        request = ExecRequest(
            jobid=record.jobid,
            gen=record.requeues,
            tasks=_own_tasks(ranks, counts, self._port.rank, launch),  # this broker's: no copy made for it below
            command=tuple(spec.command),
            userid=record.userid,
            launch=launch,
            size=spec.resources.ntasks,
            ranks=tuple(ranks),
            hosts=tuple((hostnames[r], counts[r]) for r in ranks),
            cores={r: tuple(allocation[r]) for r in ranks},
            env=spec.environment,
            cwd=spec.cwd,
            batch_script=script if isinstance(script, str) else None,
            level=int(self._port.attrs.get("instance-level") or 0),
            mpirun_args=_words(options.get("mpirun-args")),
            shell_options=options,
        )
        targets = ranks[:1] if launch == "mpi" else ranks
        ex = Execution(spec=spec, gen=record.requeues, ranks_left=set(targets))
        self._execs[record.jobid] = ex
        first = 0
        for rank in ranks:
            taskranks = tuple(range(first, first + counts[rank]))
            first += counts[rank]
            if rank not in targets:
                continue
            if launch == "broker":
                taskranks = (ranks.index(rank),)
            if rank == self._port.rank:  # job-exec here: the typed request itself (exec_request.LocalExecStart)
                local = LocalExecStart(request if taskranks == request.tasks else replace(request, tasks=taskranks))
                self._port.rpc("job-exec.start", local, rank, self._on_started(record.jobid, rank))
                continue
            payload = request.to_payload()  # a new dict each time: this rank's tasks go in it, no copy of the request
            payload["tasks"] = list(taskranks)
            self._port.rpc("job-exec.start", payload, rank, self._on_started(record.jobid, rank))
        if spec.duration > 0:
            ex.timers.append(self._port.loop.call_later(spec.duration, lambda: self._expire(record.jobid, ex.gen)))

    def _on_started(self, jobid: int, rank: int) -> Callable[[Message], None]:
        return lambda msg: self._started(jobid, rank, msg)

    def _started(self, jobid: int, rank: int, msg: Message) -> None:
        ex = self._execs.get(jobid)
        record = self._table[jobid]
        if ex is None or ex.gen != record.requeues:
            return
        if msg.errnum:
            note = f"rank {rank} ({self._port.hostnames[rank]}): exec failed: {msg.errstr}"
            self.exception(record, "exec", note)
            self._rank_done(record, ex, rank, 1 << 8)
            return
        ex.started += 1
        if ex.started == 1:
            self._table.post(record, "start", {})
            self._outputs.open_files(record)

    # ------------------------------------------------------------------ output
    def svc_exec_output(self, req: Request) -> Empty:
        jobid = req.get("id", int)
        record = self._table.get(jobid)
        if record is not None and req.payload.get("gen", 0) == record.requeues:
            self._outputs.add(jobid, req.get("lines", list))
        return {}

    # ------------------------------------------------------------------ completion
    def svc_exec_done(self, req: Request) -> Empty:
        jobid = req.get("id", int)
        record = self._table.get(jobid)
        ex = self._execs.get(jobid)
        if record is None or ex is None or req.payload.get("gen", 0) != ex.gen:
            return {}
        lines = req.get("lines", list, required=False, default=[])
        if lines:
            self._outputs.add(jobid, lines)
        self._rank_done(record, ex, req.get("rank", int), req.get("status", int))
        return {}

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
        if self._saver.checkpointed(record):
            return  # a save asked it to checkpoint: requeued, not finished
        # The pass that may start the next job is asked for before the events below ask for a journal commit: it
        # runs first at the next turn of the loop, and the commit takes its events with these (issue 45).
        self._queue.schedule_soon()
        for timer in ex.timers:
            timer.cancel()
        del self._execs[record.jobid]
        if len(record.ranks) > 1 and ex.killing:
            for rank in record.ranks:  # stray orteds and late tasks
                self._port.rpc("job-exec.kill", {"id": record.jobid, "signal": signal.SIGKILL}, rank, _ignore)
        self._table.post(record, "finish", {"status": ex.status})
        self.release(record)

    def release(self, record: JobRecord) -> None:
        """The job's resources are free and it is over."""
        self._table.post(record, "release", {"ranks": list(record.ranks), "final": True})
        self._table.post(record, "clean")
        self._queue.schedule_soon()
        self._inactive(record)

    def _inactive(self, record: JobRecord) -> None:
        self._queue.take_drain_note(record.jobid)
        self._table.retire(record.jobid)
        self._watches.job_ended(record)
        self._outputs.save(record.jobid)
        self._watches.notify_output(record.jobid)
        self._watches.annotations_ended(record)

    def requeue(self, record: JobRecord, kind: str, note: str) -> None:
        """Stop a running job and put it back in the queue (a save, a lost rank): its output so far is kept as
        this attempt's, its tasks are killed, and the exception (`kind`, severity 1) and requeue are journaled."""
        jobid = record.jobid
        ex = self._execs[jobid]
        self._outputs.save_attempt(record)
        self._table.post(record, "exception", {"type": kind, "severity": 1, "note": note})
        self._kill(record, ex, signal.SIGKILL)
        for timer in ex.timers:
            timer.cancel()
        del self._execs[jobid]
        self._table.post(record, "requeue", {"note": note})
        self._queue.enqueue(jobid)

    # ------------------------------------------------------------------ exceptions, signals, time limits
    def exception(self, record: JobRecord, kind: str, note: str, severity: int = 0) -> None:
        was_pending = bool(record.state & PENDING)
        context = {"type": kind, "severity": severity, "note": note, "userid": os.getuid()}
        self._table.post(record, "exception", context)
        if severity != 0:
            return
        if was_pending:  # never started: nothing to kill
            self._queue.dequeue(record.jobid)
            self._table.post(record, "clean")
            self._queue.mark_dirty()
            self._inactive(record)
            return
        ex = self._execs.get(record.jobid)
        if ex is not None and not ex.killing:
            self._kill(record, ex, signal.SIGTERM)

    def _kill(self, record: JobRecord, ex: Execution, signum: int) -> None:
        ex.killing = True
        self._signal_ranks(record, ex, signum, self._kill_grace)

    def _signal_ranks(self, record: JobRecord, ex: Execution, signum: int, grace: float) -> None:
        """Signal the job's tasks on each of its ranks; a rank that no longer runs them is done (see _gone)."""
        payload: KillRequest = {"id": record.jobid, "gen": ex.gen, "signal": int(signum), "grace": grace}
        for rank in record.ranks:
            self._signal_rank(record.jobid, ex.gen, rank, payload)

    def _signal_rank(self, jobid: int, gen: int, rank: int, payload: KillRequest) -> None:
        answer: Callable[[Message], None] = lambda msg: self._gone(jobid, gen, rank, msg, payload)  # noqa: E731
        self._port.rpc("job-exec.kill", payload, rank, answer, timeout=SIGNAL_ANSWER_TIMEOUT)

    def _gone(self, jobid: int, gen: int, rank: int, msg: Message, payload: KillRequest) -> None:
        """A rank that is unreachable, or whose broker does not run the job (it restarted), will never report
        the job's end there: its part ends now, as killed, so cancel and kill always end the job. A rank that
        did not answer is asked again (SIGNAL_ANSWER_TIMEOUT says why) while its part of the job is not over."""
        ex = self._execs.get(jobid)
        if ex is None or ex.gen != gen or rank not in ex.ranks_left:
            return
        if msg.errnum == ETIMEDOUT:
            self._signal_rank(jobid, gen, rank, payload)
        elif msg.errnum == EHOSTUNREACH or (not msg.errnum and msg.payload.get("present") is False):
            self._rank_done(self._table[jobid], ex, rank, KILLED)

    def _expire(self, jobid: int, gen: int) -> None:
        record = self._table[jobid]
        if jobid in self._execs and record.requeues == gen and record.state == JobState.RUN:
            self.exception(record, "timeout", "resource allocation expired")

    def svc_cancel(self, req: Request) -> Empty:
        record = self._table.record(req)
        if record.state == JobState.INACTIVE or (record.state == JobState.CLEANUP and record.jobid not in self._execs):
            raise ServiceError(EINVAL, f"{encode_f58(record.jobid)}: job is inactive")
        note = req.get("note", str, required=False, default="")
        self.exception(record, "cancel", note or "canceled by user")
        return {}

    def svc_raise(self, req: Request) -> Empty:
        record = self._table.record(req)
        if record.state == JobState.INACTIVE:
            raise ServiceError(EINVAL, f"{encode_f58(record.jobid)}: job is inactive")
        kind = req.get("type", str)
        self.exception(record, kind, req.get("note", str, required=False, default=""), req.get("severity", int))
        return {}

    def svc_kill(self, req: Request) -> Empty:
        record = self._table.record(req)
        if record.jobid not in self._execs:
            raise ServiceError(EINVAL, f"{encode_f58(record.jobid)}: job is not running")
        signum = req.get("signal", int, required=False, default=int(signal.SIGTERM))
        self._signal_ranks(record, self._execs[record.jobid], signum, 1e9)
        return {}

    # ------------------------------------------------------------------ ranks lost and back
    def on_membership(self, msg: Message) -> None:
        ranks = msg.payload.get("ranks", {})
        for key, state in ranks.items():
            rank = int(key)
            if state == UP:
                for jobid in self._orphans:
                    self._port.rpc("job-exec.kill", {"id": jobid, "signal": int(signal.SIGKILL)}, rank, _ignore)
                continue
            for jobid, ex in list(self._execs.items()):
                record = self._table[jobid]
                if rank not in record.ranks:
                    continue
                host = self._port.hostnames[rank]
                note = f"lost contact with broker rank {rank} ({host}): it is {state}"
                if requeue_allowed(record):
                    self.requeue(record, "node-failure", note)
                else:
                    self.exception(record, "node-failure", note)
                    self._rank_done(record, ex, rank, KILLED)
        self._queue.kick()


def requeue_allowed(record: JobRecord) -> bool:
    """The job asked to be requeued, not failed, when its ranks are lost (`--requeue`, system.requeue)."""
    system = record.jobspec.get("attributes", {}).get("system", {})
    return str(system.get("requeue", "")).lower() in ("1", "true", "yes", "on")


def _task_counts(spec: JobSpec, allocation: Allocation) -> dict[int, int]:
    request = spec.resources
    ranks = sorted(allocation)
    if request.nnodes is not None:
        shares = sorted(request.tasks_per_node(), reverse=True)
        return {rank: shares[i] for i, rank in enumerate(ranks)}
    return {rank: len(allocation[rank]) // request.cores_per_task for rank in ranks}


def _words(value: object) -> tuple[str, ...]:
    """The `mpirun-args` shell option: a list of words, or one string split as a shell would."""
    if isinstance(value, str):
        return tuple(shlex.split(value))
    if isinstance(value, list):
        return tuple(str(word) for word in value)
    return ()


def _own_tasks(ranks: list[int], counts: dict[int, int], own: int, launch: Launch) -> tuple[int, ...]:
    """The task ranks `start` gives this broker's job-exec (the request's `tasks` where it is one of the ranks)."""
    if own not in ranks:
        return ()
    if launch == "broker":
        return (ranks.index(own),)
    first = sum(counts[rank] for rank in ranks[: ranks.index(own)])
    return tuple(range(first, first + counts[own]))


def _ignore(_msg: Message) -> None:
    """Fire-and-forget: kills and reports whose answers nobody needs."""
