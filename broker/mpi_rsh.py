"""Open MPI's remote-start agent over the overlay: `python -m broker.mpi_rsh [ssh options] HOST COMMAND...`.

mpirun (started by job-exec on a job's first rank, see modules/mpi.py) calls this like ssh to start an orted on
HOST. We map HOST to the broker rank of that hostname and ask that broker (job-exec.rsh) to run the command;
its output is relayed here and its exit code becomes ours. No ssh daemon, no keys: the CURVE overlay carries it.
"""

from __future__ import annotations

import os
import signal
import sys

from .client import FluxError, Handle
from .modules.mpi import FORWARDED_BY_MPIRUN

_SSH_FLAGS_WITH_VALUE = {"-p", "-l", "-o", "-i", "-F", "-E", "-c", "-m", "-b", "-e", "-J"}


def split_args(argv: list[str]) -> tuple[str, str]:
    """(host, command) from ssh-style arguments; flags before the host are ignored."""
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        i += 2 if argv[i] in _SSH_FLAGS_WITH_VALUE else 1
    if i >= len(argv) - 1:
        raise ValueError("usage: python -m broker.mpi_rsh [ssh options] HOST COMMAND...")
    return argv[i], " ".join(argv[i + 1 :])


def ignore_forwarded_signals() -> None:
    """The agent lives in mpirun's process group, which a job's SIGUSR1 reaches; mpirun forwards it to the ranks
    itself, and an agent dying of it would end the orted it started (and so the job)."""
    for signum in FORWARDED_BY_MPIRUN:
        signal.signal(signum, signal.SIG_IGN)


def main(argv: list[str] | None = None) -> int:
    ignore_forwarded_signals()
    args = sys.argv[1:] if argv is None else argv
    try:
        host, command = split_args(args)
    except ValueError as exc:
        print(f"flux-mpi-rsh: {exc}", file=sys.stderr)
        return 255
    jobid = int(os.environ.get("FLUX_JOB_ID", "0"))
    try:
        with Handle() as handle:
            hosts = handle.rpc("job-exec.hosts", nodeid=0, timeout=10)["hosts"]  # the lead knows burst ranks too
            if host not in hosts:
                print(f"flux-mpi-rsh: {host}: not a host of this instance", file=sys.stderr)
                return 255
            # not FLUX_JOB_ID: orted's own command line re-enables Open MPI's "flux" PMI component, which
            # would select itself on seeing it and crash for want of flux-core's libpmi.so
            skip = ("FLUX_TASK_", "OMPI_COMM_", "FLUX_JOB_ID")
            env = {k: v for k, v in os.environ.items() if not k.startswith(skip)}
            env["PWD"] = os.getcwd()
            payload = {"id": jobid, "command": command, "env": env}
            reply = handle.rpc("job-exec.rsh", payload, nodeid=hosts.index(host), timeout=None)
    except FluxError as exc:
        print(f"flux-mpi-rsh: {host}: {exc}", file=sys.stderr)
        return 255
    for stream, _task, text in reply.get("output", []):
        (sys.stdout if stream == "stdout" else sys.stderr).write(text)
    status = int(reply.get("status", 0))
    return 128 + (status & 0x7F) if status & 0x7F else (status >> 8) & 0xFF


if __name__ == "__main__":
    sys.exit(main())
