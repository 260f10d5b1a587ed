"""Open MPI jobs without ssh: the first allocated rank runs mpirun, whose remote starts go through our overlay.

A job asks for this with the shell option `mpi=openmpi` (`flux run -o mpi=openmpi ...`; `flux run`/`submit`
set it themselves when the program is linked against libmpi, see cli/submit.py). mpirun gets a hostfile with
one line per allocated broker (its hostname, slots = that rank's task count) and `plm_rsh_agent` pointing at
`python -m broker.mpi_rsh`, which asks the broker of that host to start the orted (job-exec.rsh).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import sys
import tempfile
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ..jobs.shapes import ShellOptions
    from .exec_request import ExecRequest

AGENT = f"{sys.executable} -m broker.mpi_rsh"
# FLUX_JOB_ID in the environment makes Open MPI 4.1 pick its "flux" PMI component, which needs flux-core's
# libpmi.so and crashes without it: mpirun wires the ranks up itself. The hash store avoids PMIx's shared-memory
# store clashing between jobs on one host. The orted's rtc/hwloc component maps the node topology into shared
# memory at a guessed free address and intermittently segfaults in hwloc_shmem_topology_write when that guess
# collides (seen with OpenFOAM's larger address space); it only serves process binding, which we leave to cgroups.
MPI_ENV = {"OMPI_MCA_pmix": "^flux", "PMIX_MCA_gds": "hash", "OMPI_MCA_rtc": "^hwloc"}
YIELD_VARIABLE = "OMPI_MCA_mpi_yield_when_idle"
"""Open MPI yields the core between polls when it knows ranks outnumber a node's slots. In a MiniCluster it cannot
know: each broker reports its node's cores, pods on one node (the local and podman backends, or Kubernetes pods
with fractional requests) stack ranks on the same cores, and ranks busy-polling beside their own peers then
spend whole time slices waiting for a rank that is not running. Measured here: rhoSimpleFoam on 4 ranks over 2
local pods finished 20 iterations in 26.9 s with yielding and had not written its first time step after 10
minutes without it. So an MPI job yields unless it says otherwise or its ranks are bound one to a core
(`ranks_own_cores`)."""
FORWARDED_BY_MPIRUN = (signal.SIGUSR1, signal.SIGUSR2)
"""Signals mpirun passes on to every rank through its orteds (Open MPI 4.1's default forwarding). A job's
`flux job kill --signal=SIGUSR1` (a malleable job's resize request) reaches mpirun's process group; the orteds and
the remote-start agent must outlive it, or mpirun loses a daemon and ends the job (tests/broker/test_mpi_signals.py)."""


SESSION_VARIABLE = "OMPI_MCA_orte_tmpdir_base"
SESSION_LINK = "ompi"
"""`<job tmpdir>/ompi` links to the job's own Open MPI session base, a short directory under $TMPDIR (or under
the job's own OMPI_MCA_orte_tmpdir_base, when it sets one)."""
_ORTED_SESSION = re.compile(r"""(-mca orte_tmpdir_base )("[^"]*"|'[^']*'|\S+)""")


def session_base(tmpdir: str, parent: str | None = None) -> str:
    """This job's (or this orted's) own Open MPI session base. Open MPI keeps every job's session under one
    `/tmp/ompi.<host>.<uid>` by default, and a job cleaning up its session there races another job creating
    its own (orte_session_dir: "mkdir ... File exists"), most often when two pods share one host. A short
    directory of its own (the sockets inside must fit sun_path) removes the sharing; the link from the job's
    tmpdir lets the job's clean-up find it. `parent`: where the job asked its sessions to be (its own
    OMPI_MCA_orte_tmpdir_base), made if missing as Open MPI would; $TMPDIR when it cannot be."""
    link = os.path.join(tmpdir, SESSION_LINK)
    if os.path.islink(link):
        return os.readlink(link)
    base = None
    if parent:
        try:
            os.makedirs(parent, exist_ok=True)
            base = tempfile.mkdtemp(prefix="ompi-", dir=parent)
        except OSError:
            base = None
    base = base or tempfile.mkdtemp(prefix="ompi-")
    os.symlink(base, link)
    return base


def remove_session_base(tmpdir: str) -> None:
    link = os.path.join(tmpdir, SESSION_LINK)
    if os.path.islink(link):
        shutil.rmtree(os.readlink(link), ignore_errors=True)


def orted_session_parent(command: str) -> str | None:
    """Where mpirun's own session base is (the directory holding it), from the orted command it sends."""
    match = _ORTED_SESSION.search(command)
    if match is None:
        return None
    words = shlex.split(match.group(2))
    return os.path.dirname(words[0].rstrip("/")) if words else None


def orted_command(command: str, base: str) -> str:
    """mpirun passes its session base to every orted (`-mca orte_tmpdir_base "<path>"`): an orted gets one of
    its own instead, beside mpirun's, so mpirun's clean-up and the orted's never meet on a host they share."""
    return _ORTED_SESSION.sub(lambda m: m.group(1) + shlex.quote(base), command, count=1)


def wants_openmpi(shell_options: ShellOptions) -> bool:
    value = str(shell_options.get("mpi", "")).lower()
    return value in ("openmpi", "ompi", "openmpi@5", "openmpi@4")


def ranks_own_cores(request: ExecRequest, per_task: bool) -> bool:
    """Whether every rank of the job is bound to cores of its own: per-task binding (`per_task`, with cores to
    bind to) and no host given more ranks than the job was allocated cores there (pure)."""
    if not per_task or len(request.hosts) != len(request.ranks):
        return False
    counts = zip(request.ranks, (count for _host, count in request.hosts), strict=True)
    return all(count <= len(request.cores.get(rank, ())) for rank, count in counts)


def mpi_environment(request: ExecRequest, env: Mapping[str, str], per_task: bool) -> dict[str, str]:
    """What an MPI job's environment gains (pure): MPI_ENV, and YIELD_VARIABLE=1 unless the job sets it itself or
    its ranks own their cores (busy-polling is then the lowest latency, as Open MPI's default intends)."""
    added = dict(MPI_ENV)
    if YIELD_VARIABLE not in env and not ranks_own_cores(request, per_task):
        added[YIELD_VARIABLE] = "1"
    return added


def mpirun_command(request: ExecRequest, tmpdir: str, rank: int) -> list[str]:
    """The mpirun command line for this job (run by the job's first rank)."""
    hosts = request.hosts
    hostfile = os.path.join(tmpdir, "hostfile")
    with open(hostfile, "w", encoding="utf-8") as handle:
        handle.writelines(f"{name} slots={count}\n" for name, count in hosts)
    command = [
        "mpirun",
        "-np",
        str(request.size),
        "--hostfile",
        hostfile,
        "--leave-session-attached",  # orteds stay children of the agent, so job kill reaches them
        "--mca",
        "plm_rsh_agent",
        AGENT,
        "--mca",
        "plm_rsh_no_tree_spawn",
        "1",
        "--mca",
        "plm_rsh_assume_same_shell",
        "1",
    ]
    if os.geteuid() == 0:
        command.append("--allow-run-as-root")
    return [*command, *request.mpirun_args, *request.command]


def describe(command: list[str]) -> str:
    return shlex.join(command)
