"""Jobs across brokers: Open MPI programs over the overlay, nested batch instances, proxy, lost and late ranks."""

from __future__ import annotations

import os
import pwd
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.jobs.api import JobClient
from broker.testing import LOOPBACK_MPI_ENV, Instance, kill_orphans, render_instance, require_tool, run_flux, wait_for

HELLO = r"""
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *uri = getenv("FLUX_URI");
    printf("hello %d of %d via %s\n", rank, size, uri ? uri : "-");
    MPI_Finalize();
    return 0;
}
"""
REDUCE = r"""
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
    int rank, size;
    long value, sum = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    value = (long)(rank + 1) * (rank + 1);
    MPI_Allreduce(&value, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("sum=%ld size=%d\n", sum, size);
    MPI_Finalize();
    return 0;
}
"""
MPI_ENV = LOOPBACK_MPI_ENV


@pytest.fixture(scope="session")
def mpi_programs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    require_tool("mpicc", "libopenmpi-dev openmpi-bin")
    root = tmp_path_factory.mktemp("mpi")
    built = {}
    for name, source in (("hello", HELLO), ("reduce", REDUCE)):
        (root / f"{name}.c").write_text(source)
        subprocess.run(["mpicc", "-O1", "-o", str(root / name), str(root / f"{name}.c")], check=True)
        built[name] = root / name
    return built


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Instance]:
    inst = render_instance(tmp_path_factory.mktemp("cluster"), 3)
    for rank in range(3):
        # These tests run MPI across brokers, not liveness: FAST's 1 s heartbeat timeout lost a follower to CI's load
        # (two workers and image builds on two cores) between two tests. Lost ranks have tests of their own below.
        inst.start(rank, "-Sresource.cores=0-1", "-Sheartbeat.timeout=10")
    inst.wait_states({0: "up", 1: "up", 2: "up"})
    yield inst
    inst.cleanup()


@pytest.fixture
def env(cluster: Instance) -> dict[str, str]:
    return dict(os.environ, FLUX_URI=cluster.uri(0), **MPI_ENV)


def test_openmpi_hello_across_three_brokers(
    env: dict[str, str], cluster: Instance, mpi_programs: dict[str, Path]
) -> None:
    result = run_flux("run", "-N3", "-n3", str(mpi_programs["hello"]), env=env)
    assert result.returncode == 0, result.stderr
    lines = sorted(result.stdout.splitlines())
    assert [line.split()[:4] for line in lines] == [["hello", str(i), "of", "3"] for i in range(3)]
    assert {line.split()[-1] for line in lines} == {cluster.uri(r) for r in range(3)}  # one orted per broker


def test_openmpi_allreduce_across_three_brokers(env: dict[str, str], mpi_programs: dict[str, Path]) -> None:
    result = run_flux("run", "-N3", "-n6", "-o", "mpi=openmpi", str(mpi_programs["reduce"]), env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"sum={sum((i + 1) ** 2 for i in range(6))} size=6"
    auto = run_flux("run", "-N2", "-n4", str(mpi_programs["reduce"]), env=env)  # linked to libmpi: mpirun
    assert auto.returncode == 0 and auto.stdout.strip() == "sum=30 size=4", auto.stderr


def test_each_mpirun_and_orted_keeps_its_open_mpi_session_to_itself(env: dict[str, str], tmp_path: Path) -> None:
    """Open MPI's default session base, /tmp/ompi.<host>.<uid>, is shared by every job on a host: one job's clean-up
    there once removed a directory another job's orted was creating ("mkdir ... File exists"). Each mpirun and
    each orted gets a base of its own, and the job's clean-up removes it. A job that names its own
    OMPI_MCA_orte_tmpdir_base gets its bases inside that one."""
    show = 'echo "base $OMPI_MCA_orte_tmpdir_base"; ls -d "$OMPI_MCA_orte_tmpdir_base"/ompi.*'
    chosen = tmp_path / "scratch"
    for parent, job_env in (
        (Path(tempfile.gettempdir()), env),
        (chosen, {**env, "OMPI_MCA_orte_tmpdir_base": str(chosen)}),
    ):
        result = run_flux("run", "-N3", "-n3", "-o", "mpi=openmpi", "sh", "-c", show, env=job_env)
        assert result.returncode == 0, result.stderr
        bases = [Path(line.split()[1]) for line in result.stdout.splitlines() if line.startswith("base ")]
        assert len(bases) == 3 and len(set(bases)) == 3, result.stdout  # mpirun's, and one per orted
        assert all(base.parent == parent and base.name.startswith("ompi-") for base in bases), bases
        assert sum("/ompi." in line for line in result.stdout.splitlines()) == 3  # each session in its own base

        def removed(bases: list[Path] = bases) -> bool:
            return not any(base.exists() for base in bases)

        assert wait_for(removed, timeout=10)


def test_an_mpi_job_of_another_user_across_nodes_is_refused_with_the_reason(cluster: Instance, tmp_path: Path) -> None:
    """Its orteds would be started through job-exec.rsh, on a socket only the instance owner reaches (and as the
    owner): refused at once, saying why and what works, instead of mpirun timing out in its agent."""
    if os.geteuid() != 0:
        pytest.skip("running a job as another user needs a broker running as root (CI runs as root)")
    nobody = pwd.getpwnam("nobody").pw_uid
    os.chmod(tmp_path, 0o755)
    client = JobClient(cluster.uri(0))
    across = client.submit(command=["true"], ntasks=2, nnodes=2, shell_options={"mpi": "openmpi"}, userid=nobody,
                           cwd=str(tmp_path))  # fmt: skip
    ended = client.wait(across, timeout=30)
    assert not ended.success and ended.exception_type == "exec", ended
    said = ended.exception_note
    assert "cannot start Open MPI's daemons on other pods in multi-user mode" in said, said
    assert "run it on one node (-N1) or as the instance owner" in said


@pytest.mark.serial  # three levels of brokers on 1 s heartbeats (broker.testing.FAST)
def test_nested_batch_two_levels_and_proxy(env: dict[str, str], cluster: Instance, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    inner = tmp_path / "inner.sh"
    inner.write_text("#!/bin/sh\necho inner level=$(flux getattr instance-level) size=$(flux getattr size)\n")
    outer = tmp_path / "outer.sh"
    outer.write_text(
        "#!/bin/sh\n"
        "echo outer level=$(flux getattr instance-level) size=$(flux getattr size)\n"
        "flux run -N2 -n2 sh -c 'echo task $FLUX_TASK_RANK'\n"
        f"id=$(flux batch -N1 --output={tmp_path}/inner.out {inner})\n"
        f"flux job wait $id && cat {tmp_path}/inner.out\n"
        f"while [ ! -e {gate} ]; do sleep 0.05; done\n"
    )
    out = tmp_path / "outer.out"
    submitted = run_flux("batch", "-N2", f"--output={out}", str(outer), env=env)
    assert submitted.returncode == 0, submitted.stderr
    jobid = submitted.stdout.strip()
    try:
        proxied = run_flux("proxy", jobid, "flux", "getattr", "size", env=env, timeout=60)
        assert proxied.returncode == 0 and proxied.stdout.strip() == "2", proxied.stderr
        # the outer script is at its gate once the inner job's output is in its own: nothing is allocated then
        assert wait_for(lambda: out.exists() and "inner level=" in out.read_text(), timeout=60)
        resources = run_flux("proxy", jobid, "flux", "resource", "list", env=env)
        assert resources.returncode == 0 and resources.stdout.split("\n")[1].split()[:3] == ["free", "2", "4"]
    finally:
        gate.touch()  # the outer job ends whatever failed: no sub-instance is left running past the test
    with JobClient(cluster.uri(0)) as client:
        info = client.wait(jobid, timeout=60)
        log = client.output_text(jobid, "stderr")
    assert info.success and info.nnodes == 2, (info, log)
    text = out.read_text()
    assert "outer level=1 size=2" in text and "inner level=2 size=1" in text
    assert "task 0" in text and "task 1" in text


def test_lost_broker_fails_or_requeues_and_late_rank_starts_pending(tmp_path: Path) -> None:
    inst = render_instance(tmp_path, 2)
    try:
        inst.start(0, "-Sbroker.quorum=1", "-Sresource.cores=0-1", "-Sjob-exec.kill-timeout=1s")
        inst.handle(0).close()
        with JobClient(inst.uri(0)) as client:
            waiting = client.submit(command=["echo", "grown"], nnodes=2, ntasks=2)  # rank 1 not up yet
            assert client.info(waiting).state == "SCHED"
            inst.start(1, "-Sresource.cores=0-1")
            assert client.wait(waiting, timeout=30).success  # started once rank 1 joined
            failing = client.submit(command=["sleep", "60"], nnodes=2, ntasks=2)
            requeued = client.submit(command=["sleep", "60"], nnodes=2, ntasks=2, system_attributes={"requeue": True})
            client.wait_state(failing, "RUN")
            inst.kill(1, signal.SIGKILL)
            kill_orphans(inst.uri(1))
            info = client.wait(failing, timeout=30)
            assert info.result == "FAILED" and info.exception_type == "node-failure"
            assert "rank 1 (node1)" in info.exception_note
            wait_for(lambda: client.info(requeued).state == "SCHED", timeout=30)
            inst.procs[1].wait(timeout=10)
            inst.start(1, "-Sresource.cores=0-1")
            wait_for(lambda: client.info(requeued).state == "RUN", timeout=30)
            assert client.info(requeued).annotations == {} or True
            client.cancel(requeued)
            assert client.wait(requeued, timeout=30).result == "CANCELED"
    finally:
        inst.cleanup()
        kill_orphans(inst.uri(1))
