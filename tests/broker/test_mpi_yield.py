"""An MPI job's ranks yield the core between polls (OMPI_MCA_mpi_yield_when_idle=1) unless the job says otherwise
or its ranks are bound one to a core: pods sharing a node stack ranks on the same cores, which Open MPI cannot see
(rhoSimpleFoam on 4 ranks over 2 local pods: 26.9 s yielding, no first time step after 10 minutes without)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from broker.modules import mpi
from broker.modules.exec_request import ExecRequest
from broker.testing import LOOPBACK_MPI_ENV

FLUX = str(Path(sys.executable).with_name("flux"))
SAY = 'echo "$0 rank $OMPI_COMM_WORLD_RANK yield=${OMPI_MCA_mpi_yield_when_idle:-unset}"'
SCRIPT = f"""
flux run -N2 -n2 -o mpi=openmpi sh -c '{SAY}' default || exit 1
flux run -N2 -n2 -o mpi=openmpi --env=OMPI_MCA_mpi_yield_when_idle=0 sh -c '{SAY}' theirs || exit 1
flux run -N2 -n2 -o mpi=openmpi -o cpu-affinity=per-task sh -c '{SAY}' bound || exit 1
"""


def _request(counts: list[int], cores: dict[int, tuple[int, ...]]) -> ExecRequest:
    ranks = tuple(range(len(counts)))
    return ExecRequest(
        jobid=1, gen=0, tasks=(0,), command=("true",), userid=0, launch="mpi", size=sum(counts), ranks=ranks,
        hosts=tuple((f"pod-{r}", n) for r, n in zip(ranks, counts, strict=True)), cores=cores,
    )  # fmt: skip


def test_ranks_yield_unless_bound_one_to_a_core_or_the_job_decides() -> None:
    two_each = _request([2, 2], {0: (0, 1), 1: (0, 1)})
    assert mpi.mpi_environment(two_each, {}, per_task=False)[mpi.YIELD_VARIABLE] == "1"
    assert mpi.YIELD_VARIABLE not in mpi.mpi_environment(two_each, {}, per_task=True)
    assert mpi.YIELD_VARIABLE not in mpi.mpi_environment(two_each, {mpi.YIELD_VARIABLE: "0"}, per_task=False)
    short_of_cores = _request([2, 3], {0: (0, 1), 1: (0, 1)})
    assert mpi.mpi_environment(short_of_cores, {}, per_task=True)[mpi.YIELD_VARIABLE] == "1"
    assert mpi.MPI_ENV.items() <= mpi.mpi_environment(two_each, {}, per_task=True).items()


def test_real_mpirun_ranks_on_both_brokers_see_the_setting(tmp_path: Path) -> None:
    env = {k: v for k, v in {**os.environ, **LOOPBACK_MPI_ENV}.items() if k != mpi.YIELD_VARIABLE}
    env["PATH"] = f"{Path(FLUX).parent}{os.pathsep}{env['PATH']}"
    done = subprocess.run(
        [FLUX, "start", "--test-size=2", "sh", "-c", SCRIPT],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(done.stdout.split("\n")[:-1]) == [
        "bound rank 0 yield=unset", "bound rank 1 yield=unset",
        "default rank 0 yield=1", "default rank 1 yield=1",
        "theirs rank 0 yield=0", "theirs rank 1 yield=0",
    ]  # fmt: skip
