"""Starting jobs on their ranks, their completion, and jobs on ranks that are lost or return."""

from __future__ import annotations

import signal
from collections.abc import Callable
from typing import Any

from ...jobs.jobspec import JobSpec
from ...jobs.record import JobRecord
from ...membership import UP
from ...protocol import Message
from ...service import Request
from ..mpi import wants_openmpi
from .core import KILLED, Execution, JobManagerCore, _ignore


class Start(JobManagerCore):
    def _start(self, record: JobRecord, allocation: dict[int, list[int]]) -> None:
        self.queue.discard(record.jobid)
        if self.drain_noted.pop(record.jobid, None):  # no longer waiting for drained ranks
            self.post(record, "annotate", {"sched": {"reason_pending": ""}})
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
            self._output_files(record)

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
        files = self._output_files(self.jobs[jobid])
        if files is not None:
            files.write(lines)
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
        if self._checkpointed(record, ex):
            return  # a save asked it to checkpoint: requeued, not finished
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
        self.drain_noted.pop(record.jobid, None)
        self.specs.pop(record.jobid, None)
        info = self._info(record)
        for req in self.waiters.pop(record.jobid, []):
            req.respond(info)
        self._save_output(record.jobid)
        self._notify_output(record.jobid)
        for req, _key in self.annot_watch.pop(record.jobid, []):
            req.respond({"annotations": dict(record.extra), "state": record.state.name})

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
