"""A signal a job asks for (`flux job kill --signal=SIGUSR1`, a malleable job's resize request) reaches an Open MPI
job's ranks on every broker and ends nothing else: mpirun forwards SIGUSR1/SIGUSR2 to its ranks through its
orteds, so neither its remote-start agent (in mpirun's process group) nor the orteds' `sh -c` on the other brokers
may die of it. Found on the local malleable run: a resize ended the job with 138 (128 + SIGUSR1)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from broker.modules import mpi
from broker.testing import LOOPBACK_MPI_ENV

FLUX = str(Path(sys.executable).with_name("flux"))
RANK = "$OMPI_COMM_WORLD_RANK"
TASK = f'trap "sleep 2; echo caught {RANK}; exit 0" USR1; touch ready.{RANK}; sleep 60 & wait'
SCRIPT = f"""
id=$(flux submit -N2 -n2 -o mpi=openmpi sh -c '{TASK}') || exit 1
for i in $(seq 300); do [ -e ready.0 ] && [ -e ready.1 ] && break; sleep 0.1; done
sleep 0.5
flux job kill --signal=SIGUSR1 "$id" || exit 1
flux job attach "$id"; echo "rc=$?"
"""


def test_sigusr1_reaches_the_ranks_on_both_brokers_and_the_job_ends_as_they_do(tmp_path: Path) -> None:
    env = {**os.environ, **LOOPBACK_MPI_ENV, "PATH": f"{Path(FLUX).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        [FLUX, "start", "--test-size=2", "sh", "-c", SCRIPT],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(line for line in done.stdout.splitlines() if line.startswith("caught")) == ["caught 0", "caught 1"]
    assert done.stdout.splitlines()[-1] == "rc=0", done.stdout + done.stderr[-3000:]


def test_the_agent_ignores_the_signals_mpirun_forwards_and_not_the_others() -> None:
    program = (
        "import signal; from broker import mpi_rsh; mpi_rsh.ignore_forwarded_signals(); "
        "print(*(signal.getsignal(s) is signal.SIG_IGN for s in (signal.SIGUSR1, signal.SIGUSR2, signal.SIGTERM)))"
    )
    said = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=True)
    assert said.stdout.split() == ["True", "True", "False"]
    assert set(mpi.FORWARDED_BY_MPIRUN) == {signal.SIGUSR1, signal.SIGUSR2}
