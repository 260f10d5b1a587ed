"""job-exec, on every rank: start a job's tasks here, forward their output to the lead, report their exit.

The lead's job manager sends `job-exec.start` with this rank's share of the tasks; each task is one fork/exec in
its own process group, its stdout/stderr read by the broker loop and sent to rank 0 in batches
(`job-manager.exec-output`), and when every local task has exited the worst wait status goes back in
`job-manager.exec-done` (with the last output, so a trivial job costs one message). `job-exec.kill` signals
the process groups and escalates to SIGKILL after a grace period. `job-exec.rsh` is the remote end of the
Open MPI launch agent (broker/mpi_rsh.py): it starts an orted here on behalf of a job and answers when it exits.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import signal
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from common import idset

from ..attributes import AttrError
from ..protocol import EINVAL
from ..service import Handler, Request, ServiceError
from . import cpu_affinity, job_tree, mpi, pmpi, spawn_cpu
from .exec_launch import (
    KillReply,
    LocalJob,
    StartReply,
    Task,
    account_for,
    hand_over,
    plan_launch,
    remove_job_dir,
    start_failure,
)
from .exec_request import ExecRequest, ExecRequestError
from .job_dirs import JobDirs
from .task_spawn import ATTRIBUTE as SPAWN_ATTRIBUTE
from .task_spawn import TaskSpawner, seal_descriptors

if TYPE_CHECKING:
    from ..port import ModulePort
    from ..protocol import Message

OUTPUT_BATCH_DELAY = 0.05
EOF_GRACE = 1.0  # after a task exits, how long a grandchild may keep its pipes open before we stop reading
DEFAULT_KILL_GRACE = 5.0
MAX_LINE = 65536
BINDIR = os.path.dirname(sys.executable)
"""Where `flux` is, put on a job's PATH for jobs that call it."""


class JobExec:
    """Per-rank process management for jobs."""

    def __init__(self, broker: ModulePort) -> None:
        self.b = broker
        self.jobs: dict[int, LocalJob] = {}  # by job id; rsh-started orteds under negative keys
        self._rsh_seq = 0
        self.kill_grace = broker.attrs.duration("job-exec.kill-timeout", DEFAULT_KILL_GRACE)
        here = broker.attrs.boolean(spawn_cpu.ATTRIBUTE, spawn_cpu.DEFAULT)
        self.spawner = TaskSpawner(broker.attrs.boolean(SPAWN_ATTRIBUTE, True), broker.log, here)
        if self.spawner.fast:
            seal_descriptors()  # posix_spawn closes nothing: what we inherited stays ours
        reported = set(idset.decode(str(broker.resources.get("cores", ""))))
        try:
            self.default_affinity, note = cpu_affinity.instance_default(
                broker.attrs.get(cpu_affinity.ATTRIBUTE), reported, os.sched_getaffinity(0)
            )
        except cpu_affinity.AffinityError as exc:
            raise AttrError(str(exc)) from None
        if note:
            print(f"flux-job-exec[{broker.rank}]: {note}", flush=True)
        self.handlers: dict[str, Handler] = {
            "job-exec.start": self.start,
            "job-exec.kill": self.kill,
            "job-exec.rsh": self.rsh,
            "job-exec.list": lambda req: {"jobs": sorted(self.jobs)},
            "job-exec.hosts": lambda req: {"hosts": list(broker.config.hostnames)},
        }
        for topic, handler in self.handlers.items():
            broker.register(topic, handler)
        self.dirs = JobDirs(os.path.join(broker.rundir, job_tree.JOB_TMP), remove_job_dir)
        self._ended: list[LocalJob] = []  # jobs over here whose directories go soon (_check_done)
        broker.on_close(self.close)
        self.tree_key = job_tree.rank_key(broker.rundir, broker.rank)
        self._own_tree = {job_tree.TREE_VARIABLE: os.environ.get(job_tree.TREE_VARIABLE, "")}  # read once
        self._uri = broker.local_uri
        # Our previous incarnation's jobs are over. Only one that ran jobs can have left any (each job's tasks
        # start in <rundir>/jobtmp), and the sweep reads every process's environment: on a fresh rundir it is
        # skipped, or N brokers starting together would read N x N environments (`flux start --test-size`).
        if os.path.isdir(os.path.join(broker.rundir, job_tree.JOB_TMP)):
            left = job_tree.sweep(f"{self.tree_key}.", prefix=True)
            if left:
                said = f"flux-job-exec[{broker.rank}]: killed {left} processes of jobs a previous broker ran"
                print(said, flush=True)

    # ------------------------------------------------------------------ starting tasks
    def start(self, req: Request) -> StartReply:
        """Start this rank's tasks of a job (as the job's user when the broker runs as root)."""
        try:
            request = ExecRequest.from_payload(req.payload)
        except ExecRequestError as exc:
            raise ServiceError(EINVAL, f"job-exec.start: {exc}") from None
        jobid = request.jobid
        job = self.jobs.get(jobid)
        if job is not None and not job.done:
            raise ServiceError(EINVAL, f"job {jobid} already has tasks on rank {self.b.rank}")
        account = account_for(request)
        affinity = self._affinity(request)
        profiling = pmpi.pmpi_settings(request.shell_options, jobid, request.cwd or os.getcwd())
        job = LocalJob(jobid, request.gen)
        self.jobs[jobid] = job
        job.tmpdir = os.path.join(self.b.rundir, job_tree.JOB_TMP, str(jobid))
        self.dirs.make(job.tmpdir)
        env = self._environment(request, job.tmpdir)
        job_cpus, note = cpu_affinity.job_cpus(affinity, request.cores.get(self.b.rank, ()), self.b.rank)
        if note:
            job.output.append(["stderr", request.tasks[0] if request.tasks else 0, note])
        profiler = pmpi.pmpi_variables(profiling, jobid, env) if profiling and request.launch != "broker" else {}
        if "MC_PMPI_DIR" in profiler:
            os.makedirs(profiler["MC_PMPI_DIR"], exist_ok=True)
        request, commands, binding = plan_launch(request, job, env, affinity, job_cpus, account, profiler, self.b)
        if affinity.verbose or affinity.dry_run:
            for (taskrank, _command), cpus in zip(commands, binding, strict=True):
                what = request.launch if request.launch != "tasks" else f"task {taskrank}"
                line = cpu_affinity.describe(self.b.rank, what, cpus, affinity.dry_run)
                job.output.append(["stderr", taskrank, line])
        if affinity.dry_run:
            binding = [() for _ in commands]
        if account is not None:
            hand_over(account, job.tmpdir, env, profiler)
        for local_id, ((taskrank, command), cpus) in enumerate(zip(commands, binding, strict=True)):
            task_env = env if len(commands) == 1 else dict(env)  # one task (the common case): no copy
            task_env.update(FLUX_TASK_RANK=str(taskrank), FLUX_TASK_LOCAL_ID=str(local_id))
            if not cpus:  # the common case, without a context manager's cost per task
                job.tasks.append(self._spawn(job, taskrank, command, task_env, request.cwd or None, account))
                continue
            with cpu_affinity.forked_on(cpus):
                job.tasks.append(self._spawn(job, taskrank, command, task_env, request.cwd or None, account))
        self._check_done(job)
        return {"rank": self.b.rank, "ntasks": len(job.tasks)}

    def _affinity(self, request: ExecRequest) -> cpu_affinity.Affinity:
        """The job's cpu-affinity (its option, else this instance's default); refused before anything starts."""
        try:
            return cpu_affinity.checked_job_affinity(
                request.shell_options, self.default_affinity, len(request.tasks) if request.launch == "tasks" else 0,
                self.b.rank, os.sched_getaffinity(0),
            )  # fmt: skip
        except cpu_affinity.AffinityError as exc:
            raise ServiceError(EINVAL, str(exc)) from None

    def _environment(self, request: ExecRequest, tmpdir: str) -> dict[str, str]:
        env = dict(request.env or os.environ)
        bindir = BINDIR
        if bindir not in env.get("PATH", "").split(os.pathsep):
            env["PATH"] = env.get("PATH", "") + os.pathsep + bindir if env.get("PATH") else bindir
        env.update(
            FLUX_JOB_ID=str(request.jobid),
            FLUX_JOB_SIZE=str(request.size),
            FLUX_JOB_NNODES=str(request.nnodes),
            FLUX_JOB_TMPDIR=tmpdir,
            FLUX_URI=self._uri,
            FLUX_KVS_NAMESPACE=f"job-{request.jobid}",
        )
        tag = job_tree.job_tag(self.tree_key, request.jobid)
        env[job_tree.TREE_VARIABLE] = job_tree.tree_value(self._own_tree, tag)
        return env

    def _spawn(
        self,
        job: LocalJob,
        taskrank: int,
        command: list[str],
        env: dict[str, str],
        cwd: str | None,
        account: pwd.struct_passwd | None = None,
    ) -> Task:
        # our own pipes, not Popen's file objects: their finalizers would close fds we may have reused
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        try:
            proc = self.spawner.spawn(command, env, cwd, out_w, err_w, account)
        except OSError as exc:
            for fd in (out_r, out_w, err_r, err_w):
                os.close(fd)
            text, code = start_failure(command[0], cwd, exc)
            job.output.append(["stderr", taskrank, f"flux-shell[{self.b.rank}]: task {taskrank}: {text}\n"])
            return Task(taskrank, None, status=code << 8)
        os.close(out_w)
        os.close(err_w)
        task = Task(taskrank, proc)
        for stream, fd in (("stdout", out_r), ("stderr", err_r)):
            os.set_blocking(fd, False)
            task.fds[fd] = stream
            self.b.loop.add_reader(fd, self._output_reader(job, task, fd))
        task.pidfd = os.pidfd_open(proc.pid)
        self.b.loop.add_reader(task.pidfd, lambda: self._on_exit(job, task))
        return task

    # ------------------------------------------------------------------ output and exit
    def _output_reader(self, job: LocalJob, task: Task, fd: int) -> Callable[[], None]:
        return lambda: self._on_output(job, task, fd)

    def _on_output(self, job: LocalJob, task: Task, fd: int) -> None:
        stream = task.fds.get(fd)
        if stream is None:
            return
        try:
            data = os.read(fd, 65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._close_fd(job, task, fd)
            return
        self._add_output(job, task, stream, data)

    def _add_output(self, job: LocalJob, task: Task, stream: str, data: bytes) -> None:
        buffered = task.partial.get(stream, b"") + data
        lines = buffered.split(b"\n")
        rest = lines.pop()
        for line in lines:
            job.output.append([stream, task.taskrank, line.decode(errors="replace") + "\n"])
        if len(rest) > MAX_LINE:
            job.output.append([stream, task.taskrank, rest.decode(errors="replace")])
            rest = b""
        task.partial[stream] = rest
        if job.output and not job.flush_pending:
            job.flush_pending = True
            self.b.loop.call_later(OUTPUT_BATCH_DELAY, lambda: self._flush_output(job))

    def _close_fd(self, job: LocalJob, task: Task, fd: int) -> None:
        stream = task.fds.pop(fd, None)
        if stream is None:
            return
        self.b.loop.remove_reader(fd)
        os.close(fd)
        rest = task.partial.pop(stream, b"")
        if rest:
            job.output.append([stream, task.taskrank, rest.decode(errors="replace")])
        self._check_done(job)

    def _flush_output(self, job: LocalJob) -> None:
        job.flush_pending = False
        if job.done or not job.output or not job.report:
            return
        lines, job.output = job.output, []
        payload = {"id": job.jobid, "gen": job.gen, "rank": self.b.rank, "lines": lines}
        self.b.rpc("job-manager.exec-output", payload, 0, _ignore)

    def _on_exit(self, job: LocalJob, task: Task) -> None:
        assert task.proc is not None
        self.b.loop.remove_reader(task.pidfd)
        os.close(task.pidfd)
        task.pidfd = -1
        task.status = task.proc.reap()
        if task.fds:  # drain what is already there; give stragglers holding the pipe a moment
            for fd in list(task.fds):
                self._on_output(job, task, fd)
            if task.fds:
                self.b.loop.call_later(EOF_GRACE, lambda: self._abandon_pipes(job, task))
        self._check_done(job)

    def _abandon_pipes(self, job: LocalJob, task: Task) -> None:
        for fd in list(task.fds):
            self._close_fd(job, task, fd)

    def _check_done(self, job: LocalJob) -> None:
        if job.done or any(t.status is None or t.fds for t in job.tasks):
            return
        for task in job.tasks:
            if task.reply is not None:
                task.reply.respond({"status": task.status, "output": job.output})
                job.output = []
        job.done = True
        status = max((t.status or 0 for t in job.tasks), default=0)
        if job.report:
            payload = {"id": job.jobid, "gen": job.gen, "rank": self.b.rank, "status": status, "lines": job.output}
            self.b.rpc("job-manager.exec-done", payload, 0, _ignore)
        job.output = []
        self._sweep_leftovers(job, status)
        if self.jobs.get(job.jobid) is job:
            del self.jobs[job.jobid]
        # Its directory goes at the end of this turn of the loop: after the scheduling pass its end asked for (on
        # the lead), so the next job's start does not wait for it; a job's end to the next one's start is the
        # path `--cc=1-N --wait` runs in (issue 45).
        self._ended.append(job)
        if len(self._ended) == 1:
            self.b.loop.call_later(0, self._release_dirs)

    def _release_dirs(self) -> None:
        ended, self._ended = self._ended, []
        for job in ended:
            if job.jobid not in self.jobs:  # else a later execution of the job started here since: it is its own
                self.dirs.release(job.tmpdir, job.gen)

    def _sweep_leftovers(self, job: LocalJob, status: int) -> None:
        """Nothing a job started outlives it: its process groups, and for a killed or failed job its whole tree.

        A successful job costs one signal per task here; the /proc walk is for jobs that were killed or
        failed (a nested instance's tasks sit in process groups of their own) or left a group behind.
        """
        leftovers = False
        for task in job.tasks:
            if task.proc is not None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(task.proc.pid, signal.SIGKILL)
                    leftovers = True
        if job.report and (leftovers or job.killed_at or status != 0):
            job_tree.sweep(job_tree.job_tag(self.tree_key, job.jobid))

    # ------------------------------------------------------------------ signals
    def kill(self, req: Request) -> KillReply:
        jobid = req.get("id", int)
        signum = int(req.payload.get("signal", signal.SIGTERM))
        self.kill_rsh(jobid, signum)
        job = self.jobs.get(jobid)
        gen = req.payload.get("gen")
        if job is None or (isinstance(gen, int) and job.gen != gen):
            return {"signaled": 0, "present": False}  # e.g. this broker restarted since: the lead ends our part
        count = self._signal(job, signum)
        if signum != signal.SIGKILL and not job.killed_at:
            job.killed_at = time.monotonic()
            grace = float(req.payload.get("grace", self.kill_grace))
            self.b.loop.call_later(grace, lambda: self._kill_now(job))
        return {"signaled": count, "present": True}

    def _kill_now(self, job: LocalJob) -> None:
        self._signal(job, signal.SIGKILL)

    def _signal(self, job: LocalJob, signum: int) -> int:
        count = 0
        for task in job.tasks:
            if task.proc is not None and task.status is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(task.proc.pid, signum)
                    count += 1
        return count

    def close(self) -> None:
        """The broker is going away: nothing it started may outlive it."""
        self._release_dirs()
        self.dirs.close()
        for job in list(self.jobs.values()):
            self._signal(job, signal.SIGKILL)
            for task in job.tasks:
                if task.proc is not None:
                    task.proc.settle(1.0)
            remove_job_dir(job.tmpdir)
        if self.jobs:
            job_tree.sweep(f"{self.tree_key}.", prefix=True)

    # ------------------------------------------------------------------ remote start for mpirun
    def rsh(self, req: Request) -> None:
        """Start `command` (a shell string, as ssh gets it) here for job `id`; respond when it exits."""
        jobid = req.get("id", int)
        command = req.get("command", str)
        env = req.get("env", dict)
        self._rsh_seq += 1
        key = -self._rsh_seq  # several orteds of one job may land on one rank
        job = LocalJob(key, 0, report=False, owner=jobid)
        job.tmpdir = os.path.join(self.b.rundir, job_tree.JOB_TMP, f"rsh-{self._rsh_seq}")
        os.makedirs(job.tmpdir, exist_ok=True)
        self.jobs[key] = job
        env = dict(env, FLUX_URI=self.b.local_uri, FLUX_JOB_TMPDIR=job.tmpdir)
        # the orted belongs to job `jobid` on this rank too: keep mpirun's tags, add ours
        own = job_tree.job_tag(self.tree_key, jobid)
        env[job_tree.TREE_VARIABLE] = " ".join([*str(env.get(job_tree.TREE_VARIABLE, "")).split(), own])
        # the orted (and so the ranks it forks here) runs on the job's cores of this rank, if the job binds
        cpus = cpu_affinity.usable(
            cpu_affinity.decode_cores(str(env.get(cpu_affinity.CORES_VARIABLE, "")), self.b.rank)
        )
        command = mpi.orted_command(command, mpi.session_base(job.tmpdir, mpi.orted_session_parent(command)))
        with cpu_affinity.forked_on(cpus):
            task = self._spawn(job, 0, ["/bin/sh", "-c", command], env, env.get("PWD"))
        task.reply = req
        job.tasks.append(task)
        self._check_done(job)
        return None

    def kill_rsh(self, jobid: int, signum: int) -> None:
        """Orteds started for job `jobid` (by mpirun through our agent) go down with the job; a signal mpirun
        forwards to the ranks itself (SIGUSR1, SIGUSR2) is left to it: the orted's `sh -c` would die of it."""
        if signum in mpi.FORWARDED_BY_MPIRUN:
            return
        for key, job in list(self.jobs.items()):
            if key < 0 and job.owner == jobid:
                self._signal(job, signum)


def _ignore(_msg: Message) -> None:
    """Fire-and-forget reports: the lead answers, nobody waits."""
