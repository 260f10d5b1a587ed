"""The narrow, typed job interface for code above the broker (REST API, local backend, controllers).

    client = JobClient()                          # $FLUX_URI, or JobClient("local:///run/flux/local")
    jobid = client.submit(command=["hostname"], ntasks=2)
    info = client.wait(jobid)                     # JobInfo: state, result, returncode, nodelist, runtime...
    text = client.output_text(jobid)

It speaks only the job-manager's RPCs, so the same calls work against any instance, nested ones included.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, cast

from broker.jobs import submit_flags
from broker.jobs.build import build_jobspec
from broker.jobs.jobid import encode_f58, parse_jobid
from broker.jobs.states import ACTIVE, JobState, parse_states

if TYPE_CHECKING:
    from broker.jobs.shapes import (
        Annotations,
        JobInfoRecord,
        Jobspec,
        JobStats,
        QueueCounts,
        QueueStatus,
        RestfulJob,
        SaveReply,
    )
    from broker.payloads import ResourceStatus

NODEID_ANY = -1
LEAD = 0


class RpcHandle(Protocol):
    """What JobClient needs from a connection (client.Handle and the lean CLI transport both fit)."""

    # open: an RPC's payload and answer: their shape is the topic's (typed by the JobClient method that asks)
    def rpc(
        self, topic: str, payload: dict[str, Any] | None = None, nodeid: int = NODEID_ANY, timeout: float | None = ...
    ) -> dict[str, Any]: ...  # open: as above

    def close(self) -> None: ...


NO_ANNOTATIONS = cast("Annotations", MappingProxyType({}))
"""A job's annotations when it has none: read-only, as every JobInfo without any shares it."""


class JobInfo(NamedTuple):
    """What the Flux RESTful API reports for a job (and `flux jobs` shows).

    NamedTuples rather than dataclasses here: this module is on `flux run`'s start-up path, and importing
    `dataclasses` (which pulls in `inspect`) costs several milliseconds per command.
    """

    id: int
    state: str
    result: str
    returncode: int | None
    nnodes: int
    ntasks: int
    nodelist: str
    runtime: float
    name: str
    userid: int
    urgency: int
    priority: int
    t_submit: float
    t_run: float
    t_cleanup: float
    t_inactive: float
    exception_type: str = ""
    exception_note: str = ""
    waitstatus: int | None = None
    duration: float = 0.0
    annotations: Annotations = NO_ANNOTATIONS
    t_depend: float = 0.0
    t_priority: float = 0.0
    t_sched: float = 0.0
    ncores: int = 0
    ranks: str = ""  # an idset, as Flux's job-list reports it ("0-3")
    expiration: float = 0.0
    exception_severity: int = -1
    cwd: str = ""
    owner: str = ""  # the REST user who submitted it (attributes.system.miniclusters.owner); "" from inside

    @property
    def f58(self) -> str:
        return encode_f58(self.id)

    @property
    def active(self) -> bool:
        return self.state != "INACTIVE"

    @property
    def success(self) -> bool:
        return self.result == "COMPLETED"

    @classmethod
    def from_dict(cls, data: JobInfoRecord) -> JobInfo:
        """A job-list record, read leniently: this broker's (jobs/info.job_info writes every key) or flux-core's
        (`flux jobs --json`, which leaves out what a job does not have yet)."""
        exception = data.get("exception") or {}
        return cls(
            id=int(data["id"]),
            state=str(data["state"]),
            result=str(data.get("result") or ""),
            returncode=data.get("returncode"),
            nnodes=int(data.get("nnodes", 0)),
            ntasks=int(data.get("ntasks", 0)),
            nodelist=str(data.get("nodelist", "")),
            runtime=float(data.get("runtime", 0.0)),
            name=str(data.get("name", "")),
            userid=int(data.get("userid", 0)),
            urgency=int(data.get("urgency", 16)),
            priority=int(data.get("priority", 0)),
            t_submit=float(data.get("t_submit", 0.0)),
            t_run=float(data.get("t_run", 0.0)),
            t_cleanup=float(data.get("t_cleanup", 0.0)),
            t_inactive=float(data.get("t_inactive", 0.0)),
            exception_type=str(exception.get("type", "")),
            exception_note=str(exception.get("note", "")),
            waitstatus=data.get("waitstatus"),
            duration=float(data.get("duration", 0.0)),
            annotations=(data.get("annotations") or {}).copy(),
            t_depend=float(data.get("t_depend", 0.0)),
            t_priority=float(data.get("t_priority", 0.0)),
            t_sched=float(data.get("t_sched", 0.0)),
            ncores=int(data.get("ncores", 0)),
            ranks=_ranks(data.get("ranks")),
            expiration=float(data.get("expiration", 0.0)),
            exception_severity=int(exception.get("severity") or 0) if exception.get("occurred") else -1,
            cwd=str(data.get("cwd", "")),
            owner=str(data.get("owner") or ""),
        )

    def to_restful(self) -> RestfulJob:
        """The shape flux-restful-api returns from GET /v1/jobs/{id}."""
        return {
            "id": self.id,
            "state": self.state,
            "result": self.result,
            "returncode": self.returncode,
            "nnodes": self.nnodes,
            "ntasks": self.ntasks,
            "nodelist": self.nodelist,
            "runtime": self.runtime,
            "exception": {
                "occurred": bool(self.exception_type),
                "type": self.exception_type,
                "note": self.exception_note,
            },
            "name": self.name,
            "userid": self.userid,
            "urgency": self.urgency,
            "priority": self.priority,
            "t_submit": self.t_submit,
            "t_run": self.t_run,
            "t_cleanup": self.t_cleanup,
            "t_inactive": self.t_inactive,
            "success": self.success,
            "duration": self.duration,
        }


def _ranks(value: Any) -> str:
    """Ranks as an idset string, whether they come as one ("0-3") or as a list ([0, 1, 2, 3])."""
    if isinstance(value, list):
        from common import idset

        return idset.encode(int(rank) for rank in value)
    return str(value or "")


class OutputLine(NamedTuple):
    stream: str  # "stdout" or "stderr"
    task: int
    text: str


def as_jobid(jobid: int | str) -> int:
    return jobid if isinstance(jobid, int) else parse_jobid(jobid)


class JobClient:
    """Submit, list, inspect, cancel, wait for and watch jobs of one instance."""

    def __init__(self, uri: str | None = None, handle: RpcHandle | None = None) -> None:
        if handle is None:
            from broker.client import Handle

            handle = Handle(uri)
        self.handle: RpcHandle = handle

    def __enter__(self) -> JobClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.handle.close()

    # open: an RPC's payload and answer, typed by each method below at the one place its JSON enters
    def _rpc(self, topic: str, payload: dict[str, Any] | None = None, timeout: float | None = 30.0) -> dict[str, Any]:
        return self.handle.rpc(topic, payload or {}, NODEID_ANY, timeout)

    def _record(self, topic: str, payload: dict[str, int | bool], timeout: float | None = 30.0) -> JobInfo:
        """A job's record, from an RPC that answers one (job-manager.info, .wait)."""
        return JobInfo.from_dict(cast("JobInfoRecord", self._rpc(topic, payload, timeout)))

    # ------------------------------------------------------------------ submission
    def submit(
        self,
        jobspec: Jobspec | None = None,
        *,
        command: list[str] | None = None,
        ntasks: int = 1,
        nnodes: int | None = None,
        cores_per_task: int = 1,
        exclusive: bool = False,
        duration: float = 0.0,
        environment: dict[str, str] | None = None,
        cwd: str | None = None,
        name: str = "",
        urgency: int = 16,
        shell_options: dict[str, Any] | None = None,  # open: as build_jobspec's
        system_attributes: dict[str, Any] | None = None,  # open: as build_jobspec's
        userid: int | None = None,
        waitable: bool = False,
    ) -> int:
        """Submit a jobspec, or build one from simple arguments; returns the job id once it is on disk.

        `userid` records who asked (the REST API passes its authenticated user); default: this process's uid.
        `waitable` keeps the job's end for one `wait_any` (flux-core's FLUX_JOB_WAITABLE).
        """
        if jobspec is None:
            if not command:
                raise ValueError("submit: give a jobspec or a command")
            jobspec = build_jobspec(
                command,
                ntasks=ntasks,
                nnodes=nnodes,
                cores_per_task=cores_per_task,
                exclusive=exclusive,
                duration=duration,
                cwd=os.getcwd() if cwd is None else cwd,
                environment=dict(os.environ) if environment is None else environment,
                name=name,
                shell_options=shell_options,
                system_attributes=system_attributes,
            )
        uid = os.getuid() if userid is None else userid
        payload = {"jobspec": jobspec, "urgency": urgency, "userid": uid}
        if waitable:
            payload["flags"] = submit_flags.WAITABLE
        reply = self._rpc("job-manager.submit", payload)
        return int(reply["id"])

    # ------------------------------------------------------------------ queries
    def jobs(self, states: str | JobState | None = None, max_entries: int = 0) -> list[JobInfo]:
        """Jobs in the given states ("active" by default; "all", "pending", "running", "inactive", names)."""
        if states is None:
            mask = ACTIVE
        elif isinstance(states, str):
            mask = ACTIVE | JobState.INACTIVE if states.lower() == "all" else parse_states(states)
        else:
            mask = states
        reply = self._rpc("job-manager.list", {"states": int(mask), "max_entries": max_entries})
        return [JobInfo.from_dict(j) for j in reply["jobs"]]

    def info(self, jobid: int | str) -> JobInfo:
        return self._record("job-manager.info", {"id": as_jobid(jobid)})

    def jobspec(self, jobid: int | str) -> Jobspec:
        """The user's jobspec as submitted (checked by the job manager then)."""
        spec: Jobspec = self._rpc("job-manager.info", {"id": as_jobid(jobid), "jobspec": True})["jobspec"]
        return spec

    def stats(self) -> JobStats:
        return cast("JobStats", self._rpc("job-manager.stats"))

    def resources(self) -> ResourceStatus:
        """R, up/down ranks, hostnames and per-rank reports (resource.status on the lead)."""
        return cast("ResourceStatus", self.handle.rpc("resource.status", {}, LEAD, 30.0))

    # ------------------------------------------------------------------ control
    def cancel(self, jobid: int | str, note: str = "") -> None:
        self._rpc("job-manager.cancel", {"id": as_jobid(jobid), "note": note})

    def kill(self, jobid: int | str, signum: int = 15) -> None:
        self._rpc("job-manager.kill", {"id": as_jobid(jobid), "signal": signum})

    def set_urgency(self, jobid: int | str, urgency: int) -> int:
        return int(self._rpc("job-manager.urgency", {"id": as_jobid(jobid), "urgency": urgency})["old_urgency"])

    def wait(self, jobid: int | str, timeout: float | None = None, take: bool = False) -> JobInfo:
        """Block until the job is inactive; its final info (raises FluxError errno 110 on timeout).

        A waitable job's end stays for `wait_any` unless `take` (`flux job wait JOBID`, as flux-core's)."""
        payload = {"id": as_jobid(jobid), "keep": True} if not take else {"id": as_jobid(jobid)}
        return self._record("job-manager.wait", payload, timeout=timeout)

    def last(self, slice_text: str = "[:1]", userid: int | None = None) -> list[int]:
        """The user's job ids, newest first, cut by a Python slice such as `[:5]` (`flux job last`)."""
        uid = os.getuid() if userid is None else userid
        return [int(j) for j in self._rpc("job-manager.history.get", {"slice": slice_text, "userid": uid})["jobs"]]

    def wait_any(self, timeout: float | None = None) -> JobInfo:
        """The end of whichever waitable job ends first and is not yet waited for (kept until taken); raises
        FluxError errno 10 (ECHILD) when no waitable job is left to wait for, as flux-core's FLUX_JOBID_ANY."""
        return self._record("job-manager.wait", {"id": submit_flags.JOBID_ANY}, timeout=timeout)

    def queue(self, action: str = "status", reason: str = "") -> QueueStatus:
        """status | start | stop | enable | disable | policy (reason = fcfs/easy)."""
        return cast("QueueStatus", self._rpc("job-manager.queue", {"action": action, "reason": reason}))

    def queue_idle(self, mode: str = "idle", timeout: float | None = None) -> QueueCounts:
        """Wait until no job runs ("idle") or no job is active at all ("drain"); answers with the counts then."""
        return cast("QueueCounts", self._rpc("job-manager.queue-idle", {"mode": mode}, timeout=timeout))

    def queue_save(self, path: str, cluster: str = "", timeout: float = 600.0, force: bool = False) -> SaveReply:
        """Stop the queue, settle running jobs by their save policy, write the queue archive at `path` (on the
        lead's filesystem; an existing file only with `force`); answers once written, with counts."""
        payload = {"path": path, "cluster": cluster, "timeout": timeout, "force": force}
        return cast("SaveReply", self._rpc("job-manager.save", payload, timeout=timeout + 60.0))

    # ------------------------------------------------------------------ output and events
    def output(self, jobid: int | str, offset: int = 0, wait: bool = False) -> tuple[list[OutputLine], int, bool]:
        """Output lines from `offset`: (lines, next offset, eof). With wait, blocks until there is news."""
        reply = self._rpc(
            "job-manager.output", {"id": as_jobid(jobid), "offset": offset, "wait": wait}, timeout=None if wait else 30
        )
        lines = [OutputLine(str(s), int(t), str(x)) for s, t, x in reply["lines"]]
        return lines, int(reply["offset"]), bool(reply["eof"])

    def output_text(self, jobid: int | str, stream: str = "stdout") -> str:
        lines, _offset, _eof = self.output(jobid)
        return "".join(line.text for line in lines if line.stream == stream)

    def watch_output(self, jobid: int | str) -> Iterator[OutputLine]:
        """Every output line as it arrives, until the job is inactive."""
        offset = 0
        while True:
            lines, offset, eof = self.output(jobid, offset, wait=True)
            yield from lines
            if eof:
                return

    # open: as callers in broker/rest take them (each entry is a shapes.EventlogEntry)
    def events(self, jobid: int | str, follow: bool = True) -> Iterator[dict[str, Any]]:
        """The job's eventlog (Flux names: submit, alloc, start, finish, ...), following it until the end."""
        offset = 0
        while True:
            payload = {"id": as_jobid(jobid), "offset": offset, "wait": follow}
            reply = self._rpc("job-manager.eventlog", payload, timeout=None if follow else 30)
            yield from reply["events"]
            offset = int(reply["offset"])
            if reply["eof"] or not follow:
                return

    def wait_state(self, jobid: int | str, state: str, timeout: float = 30.0) -> JobInfo:
        """Poll-free wait until the job has reached `state` (or gone past it)."""
        order = ["NEW", "DEPEND", "PRIORITY", "SCHED", "RUN", "CLEANUP", "INACTIVE"]
        deadline = time.monotonic() + timeout
        names = {"submit": "DEPEND", "depend": "PRIORITY", "priority": "SCHED", "alloc": "RUN"}
        names.update(finish="CLEANUP", clean="INACTIVE")
        for event in self.events(jobid):
            reached = names.get(event["name"])
            if reached and order.index(reached) >= order.index(state):
                break
            if time.monotonic() > deadline:
                break
        return self.info(jobid)
