"""`-o cpu-affinity` (flux-core's option): tasks and MPI ranks bound to the job's cores, per task or all of them,
read back from each process's own /proc/self/status Cpus_allowed_list."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from broker.modules.cpu_affinity import (
    Affinity,
    AffinityError,
    checked_job_affinity,
    decode_cores,
    encode_cores,
    instance_default,
    job_cpus,
    parse_affinity,
)
from broker.task_bind import task_cpus
from broker.testing import LOOPBACK_MPI_ENV
from common import idset
from elasticity.profiling.trace import read_job_traces
from elasticity.workloads.placement_kernels import build_placement_kernels, parse_report

FLUX = str(Path(sys.executable).with_name("flux"))
SHOW = "echo $FLUX_TASK_RANK.$OMPI_COMM_WORLD_RANK $(hostname) $(grep Cpus_allowed_list /proc/self/status | cut -f2)"
TWO_CPUS = len(os.sched_getaffinity(0)) >= 2


def test_option_forms_follow_flux_core() -> None:
    assert parse_affinity("per-task").mode == "per-task"
    assert parse_affinity("verbose,per-task") == parse_affinity("per-task").__class__("per-task", True, False)
    dry = parse_affinity("dry-run,verbose,map:0-1;2")
    assert (dry.mode, dry.verbose, dry.dry_run, dry.per_task) == ("map:0-1;2", True, True, True)
    assert parse_affinity("verbose").mode == "on"  # flux-core: options alone mean the default binding
    assert not parse_affinity("off").binds
    with pytest.raises(AffinityError, match=r"map: '0-999999999999' names a CPU above 65535"):
        parse_affinity("map:1;0-999999999999")  # refused by its ranges, never listed
    for bad in ("sometimes", "map:0-x", "per-task,verbose"):
        with pytest.raises(AffinityError, match="cpu-affinity"):
            parse_affinity(bad)


def test_the_instance_default_binds_only_cores_the_broker_owns() -> None:
    # a cpuset pod (local exclusive, the kubelet's static CPU manager): it reports what it may run on
    assert instance_default("per-task", {2, 3}, {2, 3}) == (parse_affinity("per-task"), "")
    # a quota-limited pod on a 4-core node reports core 0 like every pod beside it: binding would stack them
    default, note = instance_default("per-task", {0}, {0, 1, 2, 3})
    assert not default.binds and "ignored" in note and "0-3" in note
    assert instance_default(None, {0}, {0, 1}) == (parse_affinity("off"), "")
    with pytest.raises(AffinityError, match=r"attribute job-exec\.cpu-affinity"):
        instance_default("always", {0}, {0})


def test_per_task_shares_are_even_and_contiguous() -> None:
    cpus = (2, 3, 4, 5, 6)
    assert [task_cpus("per-task", cpus, i, 2) for i in range(2)] == [(2, 3), (4, 5, 6)]
    assert [task_cpus("per-task", cpus, i, 5) for i in range(5)] == [(c,) for c in cpus]
    # more tasks than cores: each task one core, spread as evenly as possible
    assert [task_cpus("per-task", (0, 1), i, 4) for i in range(4)] == [(0,), (0,), (1,), (1,)]
    assert task_cpus("on", cpus, 1, 2) == cpus
    assert task_cpus("map:1;0", cpus, 1, 2) == (0,)
    assert tuple(idset.decode(idset.encode([0, 1, 2, 5, 7, 8]))) == (0, 1, 2, 5, 7, 8)
    assert decode_cores(encode_cores({0: (0, 1), 3: (4,)}), 3) == (4,)
    assert decode_cores("junk", 0) == ()


def test_a_job_map_is_checked_against_its_tasks_and_the_cpus_here_before_anything_starts() -> None:
    off = Affinity("off")
    assert checked_job_affinity({"cpu-affinity": "map:1;0"}, off, 2, 0, {0, 1}).mode == "map:1;0"
    assert checked_job_affinity({}, Affinity("per-task"), 2, 0, {0, 1}).mode == "per-task"  # the default
    with pytest.raises(AffinityError, match=r"^-o cpu-affinity=map:1: 1 entries for 2 tasks on rank 3$"):
        checked_job_affinity({"cpu-affinity": "map:1"}, off, 2, 3, {0, 1})
    assert checked_job_affinity({"cpu-affinity": "map:1"}, off, 0, 3, {0, 1}).mapped  # mpirun: one per host
    with pytest.raises(AffinityError, match=r"entry 1 \(cpus 7-8\) has no CPU rank 0 may run on$"):
        checked_job_affinity({"cpu-affinity": "map:0;7-8"}, off, 2, 0, {0, 1})


def test_job_cpus_keep_what_the_broker_may_use_and_say_when_nothing_is_left() -> None:
    here = tuple(sorted(os.sched_getaffinity(0)))
    assert job_cpus(Affinity("off"), here, 0) == ((), "")
    assert job_cpus(Affinity("on"), (*here, 4000), 0) == (here, "")
    cpus, note = job_cpus(Affinity("on"), (4000, 4001), 2)
    assert cpus == () and note == "flux-shell[2]: cpu-affinity: this broker cannot use the job's cores: tasks unbound\n"
    assert job_cpus(Affinity("map:0"), (4000,), 2) == ((), "")  # map: names its CPUs itself


def _instance(size: int, script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **LOOPBACK_MPI_ENV, "PATH": f"{Path(FLUX).parent}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(
        [FLUX, "start", f"--test-size={size}", "sh", "-c", script],
        env=env, cwd=cwd, capture_output=True, text=True, timeout=180,
    )  # fmt: skip


def _bindings(stdout: str) -> dict[str, tuple[int, ...]]:
    """'task.mpirank host cpus' lines -> {'task.mpirank@host': cpus}."""
    out = {}
    for line in stdout.splitlines():
        words = line.split()
        if len(words) == 3 and "." in words[0]:
            out[f"{words[0]}@{words[1]}"] = tuple(idset.decode(words[2]))
    return out


def _cpus_of(stdout: str) -> list[tuple[int, ...]]:
    return [cpus for _key, cpus in sorted(_bindings(stdout).items())]


@pytest.mark.skipif(not TWO_CPUS, reason="needs two CPUs to give two tasks one each")
def test_tasks_bound_per_task_on_all_or_not_at_all(tmp_path: Path) -> None:
    mine = tuple(sorted(os.sched_getaffinity(0)))
    first_two = mine[:2]
    script = " && ".join(
        f"flux run -n 2 -o cpu-affinity={mode} sh -c '{SHOW}' && echo ==" for mode in ("per-task", "on", "off")
    ) + " && flux run -n 2 -o cpu-affinity=bogus true"  # fmt: skip
    proc = _instance(1, script, tmp_path)
    per_task, on, off, _ = proc.stdout.split("==")
    assert sorted(_cpus_of(per_task)) == [(first_two[0],), (first_two[1],)]  # one core each, the job's two
    assert _cpus_of(on) == [first_two, first_two]  # both on the job's two cores
    assert _cpus_of(off) == [mine, mine]  # wherever the broker may run
    # a bad value fails the job, naming the option, before anything starts
    assert proc.returncode != 0
    assert "cpu-affinity=bogus: expected off, on, per-task or map:LIST" in proc.stderr


@pytest.mark.skipif(not TWO_CPUS, reason="needs two CPUs to give two ranks one each")
def test_mpi_ranks_bound_through_mpirun_and_the_orteds(tmp_path: Path) -> None:
    mine = tuple(sorted(os.sched_getaffinity(0)))
    script = (
        f"flux run -N2 -n4 -o mpi=openmpi -o cpu-affinity=verbose,per-task sh -c '{SHOW}' && echo == && "
        f"flux run -N2 -n2 -o mpi=openmpi -o cpu-affinity=on sh -c '{SHOW}'"
    )
    proc = _instance(2, script, tmp_path)
    assert proc.returncode == 0, proc.stderr
    per_task, on = proc.stdout.split("==")
    # two brokers (both on this machine's cores), two ranks each: on every broker one core per rank, through
    # mpirun on the first and the orted job-exec.rsh started on the second
    assert sorted(_cpus_of(per_task)) == sorted([(mine[0],), (mine[1],)] * 2)
    assert proc.stderr.count("cpu-affinity: local task") == 4
    # one core allocated on each broker: the orted on broker 1 (and so its rank) is bound to it too
    assert _cpus_of(on) == [(mine[0],), (mine[0],)]


@pytest.mark.skipif(not TWO_CPUS, reason="needs two CPUs to give two ranks one each")
def test_real_mpi_ranks_pinned_and_still_profiled(tmp_path: Path) -> None:
    """The placement kernel reports each rank's own Cpus_allowed_list and its broker's CPU time; the PMPI
    profiler still loads into ranks run through the binder (its LD_PRELOAD carried past the interpreter)."""
    kernels = build_placement_kernels(tmp_path)
    proc = _instance(1, f"flux run -n2 -o pmpi -o cpu-affinity=per-task {kernels} dgemm 60 5", tmp_path)
    assert proc.returncode == 0, proc.stderr
    report = parse_report(proc.stdout)
    assert sorted(tuple(idset.decode(r.cpus)) for r in report.ranks) == [
        (c,) for c in sorted(os.sched_getaffinity(0))[:2]
    ]
    assert all(r.broker_cpu_ms >= 0 for r in report.ranks)  # the pod's broker found among the rank's ancestors
    (directory,) = tmp_path.glob("pmpi-*")
    assert sorted(t.rank for t in read_job_traces(directory, jobid=directory.name.removeprefix("pmpi-"))) == [0, 1]


@pytest.mark.skipif(not TWO_CPUS, reason="needs two CPUs to map two tasks to different ones")
def test_map_binds_named_cpus_even_when_the_allocated_cores_are_fake(tmp_path: Path) -> None:
    """A multiplexed job's cores are slot numbers the broker cannot bind to; `map:` names real CPUs outright and
    binds to them all the same (flux-core's shell binds each task to its entry whatever the allocation)."""
    first, second = sorted(os.sched_getaffinity(0))[:2]
    script = (
        f"flux run -n2 -o cpu-affinity=map:{second}\\;{first} sh -c '{SHOW}' && echo == && "
        f"flux run -n2 -o mpi=openmpi -o cpu-affinity=map:{second}\\;{second} sh -c '{SHOW}' && echo == && "
        f"flux run -n2 -o cpu-affinity=on sh -c '{SHOW}' && echo == && "
        "flux run -n1 -o cpu-affinity=map:4000 true"
    )
    env = {**os.environ, **LOOPBACK_MPI_ENV, "PATH": f"{Path(FLUX).parent}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(
        [FLUX, "start", "--test-size=1", "-Sresource.cores=4000-4001", "sh", "-c", script],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    tasks, ranks, on, _ = proc.stdout.split("==")
    assert [cpus for key, cpus in sorted(_bindings(tasks).items())] == [(second,), (first,)]
    assert _cpus_of(ranks) == [(second,), (second,)]
    mine = tuple(sorted(os.sched_getaffinity(0)))
    assert _cpus_of(on) == [mine, mine]  # `on` binds to the allocation: fake here, so unbound, and said
    assert "this broker cannot use the job's cores: tasks unbound" in proc.stderr
    # an entry naming no CPU the broker may run on refuses the job before it starts, naming the entry
    assert proc.returncode != 0
    assert "-o cpu-affinity=map:4000: entry 0 (cpus 4000) has no CPU rank 0 may run on" in proc.stderr
