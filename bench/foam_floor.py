"""What this machine allows two rhoSimpleFoam cases, measured without miniclusters (bench_multiplex.py --floor).

The same prepared case, run with plain `mpirun` on this host (Open MPI over TCP loopback, yielding when idle), four
ways: one rank alone (`floor_serial_cpu_s`, the solver's work in CPU seconds, no MPI waits in it); all ranks on
every CPU (`floor_t1_s`); two cases at once sharing every CPU (`floor_pair_shared_s`); and two at once, each held
to its own half of the CPUs (`floor_pair_partitioned_s`, null on one CPU): the best split of the machine there is
when ranks that synchronise every few hundred microseconds must not wait for the other case's ranks. From them:
`floor_theta2_shared` and `floor_theta2_partitioned` (2 x floor_t1_s / the pair's makespan), and
`floor_theta2_cpu_bound`, what the work alone would allow: the pair needs at least twice the serial CPU, so its
makespan is at least 2 x floor_serial_cpu_s / CPUs, and Theta(2) at most CPUs x floor_t1_s / floor_serial_cpu_s
(and 2).
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from elasticity.workloads.foam import foam_variables
from elasticity.workloads.openfoam import SOLVER, solver_command

TIMEOUT = 900.0


def _fresh_copy(case: Path, dest: Path) -> Path:
    """The case as prepared (mesh, decomposition, no results), at `dest`."""
    shutil.copytree(case, dest, ignore=shutil.ignore_patterns("log.*", "postProcessing"))
    for directory in [dest, *dest.glob("processor*")]:
        for entry in directory.iterdir():
            if entry.is_dir() and re.fullmatch(r"[1-9][0-9]*(\.[0-9]+)?", entry.name):
                shutil.rmtree(entry)
    return dest


def _pinned(cpus: set[int] | None) -> Callable[[], None] | None:
    if cpus is None:
        return None
    return lambda: os.sched_setaffinity(0, cpus)


def _run_all(commands: Sequence[tuple[list[str], Path, set[int] | None]]) -> float:
    """Start every command at once (each with its log, held to its CPUs or not); seconds until the last ends."""
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    started = time.monotonic()
    running = []
    for argv, log, cpus in commands:
        with log.open("w") as out:
            running.append(
                (subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, preexec_fn=_pinned(cpus)), log)
            )
    for process, log in running:
        if process.wait(timeout=TIMEOUT) != 0 or not re.search(r"^End\s*$", log.read_text(), re.MULTILINE):
            raise SystemExit(f"--floor: {SOLVER} failed ({process.returncode}); log {log}")
    return time.monotonic() - started


def measure_floor(case: Path, ranks: int, workdir: Path, say: Callable[[str], None]) -> dict[str, Any]:
    """The floor's figures for the decomposed `case` (see the module's docstring)."""
    cpus = sorted(os.sched_getaffinity(0))
    halves = [set(cpus[: len(cpus) // 2]), set(cpus[len(cpus) // 2 :])]
    root = workdir / "floor"
    root.mkdir()

    serial = _fresh_copy(case, root / "serial")
    argv = ["env", *(f"{k}={v}" for k, v in sorted(foam_variables().items())), SOLVER, "-case", str(serial)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    serial_wall = _run_all([(argv, serial / "log.serial", None)])
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    serial_cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    say(f"floor: one rank alone {serial_wall:.1f}s ({serial_cpu:.1f}s of CPU: the solver's work)")

    def case_copy(name: str) -> tuple[list[str], Path]:
        path = _fresh_copy(case, root / name)
        return solver_command(path, ranks), path / "log.run"

    t1 = _run_all([(*case_copy("t1"), None)])
    say(f"floor: {ranks} ranks on {len(cpus)} CPUs, plain mpirun: {t1:.1f}s")
    shared = _run_all([(*case_copy("shared-a"), None), (*case_copy("shared-b"), None)])
    say(f"floor: two at once sharing every CPU: {shared:.1f}s, Theta(2) {2 * t1 / shared:.2f}")
    partitioned = None
    if len(cpus) >= 2:
        partitioned = _run_all([(*case_copy("half-a"), halves[0]), (*case_copy("half-b"), halves[1])])
        say(
            f"floor: two at once, each on its own half of the CPUs: {partitioned:.1f}s, "
            f"Theta(2) {2 * t1 / partitioned:.2f}"
        )
    shutil.rmtree(root, ignore_errors=True)
    return {
        "floor_serial_cpu_s": round(serial_cpu, 2),
        "floor_t1_s": round(t1, 2),
        "floor_pair_shared_s": round(shared, 2),
        "floor_pair_partitioned_s": None if partitioned is None else round(partitioned, 2),
        "floor_theta2_shared": round(2 * t1 / shared, 3),
        "floor_theta2_partitioned": None if partitioned is None else round(2 * t1 / partitioned, 3),
        "floor_theta2_cpu_bound": round(min(2.0, len(cpus) * t1 / serial_cpu), 3),
    }
