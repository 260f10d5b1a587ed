"""job-exec's records and launch plan (broker/modules/job_exec.py runs them): a task and a job on this rank,
whom a job runs as, a failed start's words and exit code, and what processes a job's launch kind starts here.
"""

from __future__ import annotations

import os
import pwd
import shutil
from dataclasses import dataclass, field, replace
from typing import Any, TypedDict

from .. import task_bind
from ..port import ModulePort
from ..protocol import EINVAL, EPERM
from ..service import Request, ServiceError
from . import cpu_affinity, mpi, pmpi, subinstance
from .exec_request import ExecRequest
from .task_spawn import TaskProcess

OutputLine = list[Any]  # open: [stream, taskrank, text], the JSON array job-manager.exec-output carries
Commands = list[tuple[int, list[str]]]
"""(task rank, argv) of each process to start here."""


class StartReply(TypedDict):
    """job-exec.start's answer: this rank's tasks started."""

    rank: int
    ntasks: int


class KillReply(TypedDict):
    """job-exec.kill's answer: processes signalled, and whether this rank runs the job at all."""

    signaled: int
    present: bool


def start_failure(program: str, cwd: str | None, exc: OSError) -> tuple[str, int]:
    """Why a task did not start, and its exit code (127: no such command, 126: cannot run it, 1: bad cwd).

    Popen reports a failed chdir in the child with the directory as the error's filename.
    """
    reason = exc.strerror or str(exc)
    if cwd and exc.filename == cwd and exc.filename != program:
        return f"start failed: cannot change to working directory {cwd}: {reason}", 1
    if isinstance(exc, FileNotFoundError):
        return f"start failed: {program}: command not found", 127
    return f"start failed: {program}: {reason}", 126


@dataclass
class Task:
    """One process of a job on this rank."""

    taskrank: int
    proc: TaskProcess | None
    pidfd: int = -1
    fds: dict[int, str] = field(default_factory=dict)  # pipe fd -> "stdout"/"stderr"
    partial: dict[str, bytes] = field(default_factory=dict)
    status: int | None = None
    reply: Request | None = None  # job-exec.rsh: answered when the process exits


_UID = os.getuid()  # the broker's, fixed: read once, not at every job's start


def run_as(userid: int) -> pwd.struct_passwd | None:
    """The account to switch to for a job of `userid`, None to run as ourselves; refuses what we cannot do."""
    if userid == _UID:
        return None
    if os.geteuid() != 0:
        raise ServiceError(EPERM, f"cannot run a job as uid {userid}: the broker does not run as root")
    try:
        return pwd.getpwuid(userid)
    except KeyError:
        raise ServiceError(EINVAL, f"cannot run a job as uid {userid}: no such user on rank's host") from None


def account_for(request: ExecRequest) -> pwd.struct_passwd | None:
    """The account the job runs as (run_as), refused where its launch cannot work as that account."""
    account = run_as(request.userid)
    if request.launch == "mpi" and account is not None and request.nnodes > 1:
        # mpirun starts its orteds on the other ranks through job-exec.rsh, which its agent reaches on the
        # broker's socket: the instance owner's alone (a 0700 rundir), and the orted would run as the owner.
        raise ServiceError(
            EPERM,
            f"-o mpi=openmpi across {request.nnodes} nodes: a job of another user (uid {request.userid}) cannot "
            "start Open MPI's daemons on other pods in multi-user mode (its launch agent cannot reach the "
            "broker as that user); run it on one node (-N1) or as the instance owner",
        )
    return account


def hand_over(account: pwd.struct_passwd, tmpdir: str, env: dict[str, str], profiler: dict[str, str]) -> None:
    """A job of another user: the directories made for it become its own, and its environment names it."""
    os.chown(tmpdir, account.pw_uid, account.pw_gid)
    if mpi.SESSION_VARIABLE in env:
        os.chown(env[mpi.SESSION_VARIABLE], account.pw_uid, account.pw_gid)
    if "MC_PMPI_DIR" in profiler:
        os.chown(profiler["MC_PMPI_DIR"], account.pw_uid, account.pw_gid)
    env.update(HOME=account.pw_dir, USER=account.pw_name, LOGNAME=account.pw_name)


@dataclass
class LocalJob:
    """One job's tasks on this rank, their output not yet sent, and how far their end has got."""

    jobid: int
    gen: int
    tasks: list[Task] = field(default_factory=list)
    output: list[OutputLine] = field(default_factory=list)
    flush_pending: bool = False
    tmpdir: str = ""
    killed_at: float = 0.0
    done: bool = False
    report: bool = True  # rsh-only jobs (orteds) report through the agent, not to the job manager
    owner: int = 0  # for rsh entries: the job the orted belongs to


def session_parent(env: dict[str, str], account: pwd.struct_passwd | None) -> tuple[str | None, str | None]:
    """Where the job's Open MPI session bases go (its own OMPI_MCA_orte_tmpdir_base, else None: $TMPDIR), and a
    note for the job's stderr when its choice is not used. A job of another user never chooses: the broker (root)
    would make and chown a directory inside one the user controls, where a symlink swapped in would hand the
    user whatever it points at; under $TMPDIR (sticky) the user cannot replace what root made."""
    parent = env.get(mpi.SESSION_VARIABLE) or None
    if parent is None or account is None:
        return parent, None
    return (
        None,
        f"{mpi.SESSION_VARIABLE}={parent} not used: a job of another user keeps its Open MPI sessions in $TMPDIR",
    )


def remove_job_dir(path: str) -> None:
    """A job's directory, with the sub-instance and Open MPI session directories it links to; an empty one (most
    jobs leave theirs so) in one rmdir."""
    try:
        os.rmdir(path)
        return
    except OSError:
        pass
    subinstance.remove_child_rundir(path)
    mpi.remove_session_base(path)
    shutil.rmtree(path, ignore_errors=True)


def plan_launch(
    request: ExecRequest,
    job: LocalJob,
    env: dict[str, str],
    affinity: cpu_affinity.Affinity,
    job_cpus: tuple[int, ...],
    account: pwd.struct_passwd | None,
    profiler: dict[str, str],
    port: ModulePort,
) -> tuple[ExecRequest, Commands, list[tuple[int, ...]]]:
    """What to start here for the job's launch kind (mpirun, a sub-instance's broker, or its tasks), and the CPUs
    each process binds to; `env` gains what the launch needs, `job.output` a note when a choice is not used."""
    if request.launch == "mpi":
        bound_per_task = bool(job_cpus) and affinity.mode == "per-task" and not affinity.dry_run
        env.update(mpi.mpi_environment(request, env, bound_per_task))
        sessions, ignored = session_parent(env, account)
        if ignored:
            job.output.append(
                ["stderr", request.tasks[0] if request.tasks else 0, f"flux-shell[{port.rank}]: {ignored}\n"]
            )
        env[mpi.SESSION_VARIABLE] = mpi.session_base(job.tmpdir, sessions)
        exports = profiler
        if job_cpus and not affinity.dry_run:  # each orted binds to its rank's cores (job-exec.rsh)
            env[cpu_affinity.CORES_VARIABLE] = cpu_affinity.encode_cores(request.cores)
        if (job_cpus or affinity.mapped) and affinity.per_task:  # and each rank to its own share of them
            request = replace(request, command=(*cpu_affinity.mpirun_wrapper(affinity), *request.command))
            exports = cpu_affinity.carry_preload(profiler)
        request = replace(request, mpirun_args=(*pmpi.mpirun_exports(exports), *request.mpirun_args))
        commands = [(0, mpi.mpirun_command(request, job.tmpdir, port.rank))]
        binding = [job_cpus]
    elif request.launch == "broker":
        commands = [(request.tasks[0], subinstance.launch_command(request, job.tmpdir, port))]
        binding = [job_cpus]
    else:
        env.update(profiler)
        commands = [(rank, list(request.command)) for rank in request.tasks]
        binding = [
            task_bind.task_cpus(affinity.mode, job_cpus, i, len(commands)) if job_cpus or affinity.mapped else ()
            for i in range(len(commands))
        ]
    return request, commands, binding
