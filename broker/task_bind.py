"""Bind one MPI rank to its share of its host's job cores, then exec it: `task_bind.py MODE [-v] [-n] -- CMD`.

Open MPI's ranks are forked by mpirun and the orteds, not by job-exec, so `cpu-affinity=per-task` (or `map:`)
cannot bind them at fork time: mpirun runs each rank through this script instead. The rank inherits the job's
cores on this host (job-exec binds mpirun and the orteds to them); its share is picked from those by its local
rank (OMPI_COMM_WORLD_LOCAL_RANK of OMPI_COMM_WORLD_LOCAL_SIZE, else FLUX_TASK_LOCAL_ID), exactly as job-exec
picks a plain task's. `-v` logs the binding to stderr, `-n` (dry run) logs without binding. The profiler's
LD_PRELOAD travels as MC_TASK_LD_PRELOAD so it loads into the rank, not into this interpreter.

Standard library and the bottom layer (`common.idset`) only, and importable: job-exec uses `task_cpus` for its own
tasks. Run as `python -I -S task_bind.py`, it finds `common` beside its own package (the checkout or the bundle).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

if __name__ == "__main__":  # isolated (-I -S): the package root is not on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from common import idset

PRELOAD_CARRIER = "MC_TASK_LD_PRELOAD"


def task_cpus(mode: str, cpus: tuple[int, ...], index: int, ntasks: int) -> tuple[int, ...]:
    """The CPUs of local task `index` of `ntasks` given the job's `cpus` here (flux-core's semantics).

    on: all of them. per-task: an even, contiguous share each (the first tasks get the larger shares); with more
    tasks than CPUs, tasks share CPUs as evenly as possible. map:L0;L1;...: entry `index` of the list.
    """
    if mode.startswith("map:"):
        entries = mode[4:].split(";")
        if index >= len(entries):
            raise ValueError(f"map: has {len(entries)} entries, task {index} has none")
        return tuple(idset.decode(entries[index]))
    if mode != "per-task" or not cpus:
        return cpus
    n = len(cpus)
    if ntasks <= n:
        return cpus[index * n // ntasks : (index + 1) * n // ntasks]
    return (cpus[index * n // ntasks],)


def _local_rank() -> tuple[int, int]:
    env = os.environ
    if "OMPI_COMM_WORLD_LOCAL_RANK" in env:
        return int(env["OMPI_COMM_WORLD_LOCAL_RANK"]), int(env.get("OMPI_COMM_WORLD_LOCAL_SIZE", "1"))
    return int(env.get("FLUX_TASK_LOCAL_ID", "0")), int(env.get("FLUX_TASK_LOCAL_COUNT", "1"))


def main(argv: list[str]) -> int:
    if "--" not in argv or argv.index("--") < 1 or argv.index("--") == len(argv) - 1:
        print("task_bind: usage: task_bind.py MODE [-v] [-n] -- COMMAND...", file=sys.stderr)
        return 2
    split = argv.index("--")
    mode, flags, command = argv[0], argv[1:split], argv[split + 1 :]
    index, ntasks = _local_rank()
    inherited = tuple(sorted(os.sched_getaffinity(0)))
    try:
        mine = task_cpus(mode, inherited, index, ntasks)
    except ValueError as exc:
        print(f"task_bind: cpu-affinity={mode}: {exc}", file=sys.stderr)
        return 2
    if "-v" in flags or "-n" in flags:
        host = os.uname().nodename
        print(f"flux-shell[{host}]: cpu-affinity: local task {index}: cpus {idset.encode(mine)}", file=sys.stderr)
    if "-n" not in flags and mine:
        try:
            os.sched_setaffinity(0, mine)
        except OSError as exc:
            print(f"task_bind: cannot bind to cpus {idset.encode(mine)}: {exc.strerror}", file=sys.stderr)
            return 1
    if PRELOAD_CARRIER in os.environ:
        os.environ["LD_PRELOAD"] = os.environ.pop(PRELOAD_CARRIER)
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        print(f"task_bind: {command[0]}: {exc.strerror}", file=sys.stderr)
        return 127 if isinstance(exc, FileNotFoundError) else 126


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
