"""The `cpu-affinity` shell option (flux-core's names and meanings): which cores each of a job's tasks may run on.

    off        no binding: tasks run wherever the broker may (our default, see below)
    on         every task bound to the cores the job was allocated on this rank
    per-task   those cores divided evenly among the rank's tasks, each task bound to its own share
    map:LIST   task i bound to the i-th of a ';'-separated list of CPU lists ('map:0-1;2-3')
    verbose,X / dry-run,X   log each task's cores to the job's stderr (dry-run: without binding)

flux-core's default is `on`. Ours is the instance attribute `job-exec.cpu-affinity`, `off` unless set: brokers
of pods sharing a node each report the node's cores, so two pods binding their jobs to "core 0" would stack
them on one real core. Exclusive pods (spec.placement.cpus: exclusive) own their cores and start their brokers
with `per-task`, so every rank gets a core of its own. Cores the job was allocated that this broker may not use
(fake slots) are dropped; if none are left the job runs unbound, with a note on its stderr. `map:` names CPUs
outright and binds to them whatever the job was allocated (a multiplexed job's slots are fake), as flux-core's
shell does; an entry with no CPU the broker may run on refuses the job before anything starts, naming it.

Plain tasks are bound as they are forked (job-exec narrows its own thread's mask around the fork); MPI ranks,
forked by mpirun and the orteds, through broker/task_bind.py (see mpirun_wrapper).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from common import idset

from .. import task_bind
from ..errors import InputError
from ..jobs.shapes import ShellOptions

ATTRIBUTE = "job-exec.cpu-affinity"
OPTION: Final = "cpu-affinity"
MODES = ("off", "on", "per-task")
CORES_VARIABLE = "MC_JOB_CORES"
"""In mpirun's environment (and so in every orted's rsh request): the job's cores per broker rank, 'r:0-1 r2:2'."""


class AffinityError(InputError):
    """A cpu-affinity value that is not one of the known forms (the message names the option)."""


@dataclass(frozen=True)
class Affinity:
    """How a job's tasks are bound to its cores (the shell's cpu-affinity option)."""

    mode: str
    """off, on, per-task or map:LIST."""
    verbose: bool = False
    dry_run: bool = False

    @property
    def binds(self) -> bool:
        return self.mode != "off"

    @property
    def mapped(self) -> bool:
        """map:LIST: CPUs named outright, bound to whatever the job was allocated (as flux-core's shell does)."""
        return self.mode.startswith("map:")

    @property
    def per_task(self) -> bool:
        """Each task gets its own share (not all of the job's cores)."""
        return self.mode == "per-task" or self.mode.startswith("map:")


def parse_affinity(value: object, where: str = f"-o {OPTION}") -> Affinity:
    """flux-core's syntax: [verbose,][dry-run,]off|on|per-task|map:LIST. AffinityError names `where`."""
    text = str(value).strip() if value is not None else "off"
    verbose = dry_run = False
    while True:
        head, comma, rest = text.partition(",")
        if head == "verbose" and (comma or not rest):
            verbose, text = True, rest
        elif head == "dry-run" and (comma or not rest):
            dry_run, text = True, rest
        else:
            break
    mode = text or "on"
    if mode.startswith("map:"):
        entries = mode[4:].split(";")
        try:
            for entry in entries:
                _parse_map_entry(entry)
        except ValueError as exc:
            raise AffinityError(f"{where}={value}: map: {exc}") from None
    elif mode not in MODES:
        raise AffinityError(
            f"{where}={value}: expected off, on, per-task or map:LIST (each may follow verbose, or dry-run,)"
        )
    return Affinity(mode, verbose, dry_run or False)


def instance_default(value: str | None, reported: set[int], allowed: set[int]) -> tuple[Affinity, str]:
    """The instance's default binding from the attribute, and a note when it cannot apply (else "").

    It binds only if this broker owns what it reports: its cores are exactly the CPUs it may run on. A pod
    limited by CPU quota but not by a cpuset (Kubernetes without the static CPU manager, podman) reports the
    first cores of the node, the same as every such pod beside it; binding there would stack them all on
    those cores, so the default falls back to off.
    """
    configured = parse_affinity(value or "off", f"attribute {ATTRIBUTE}")
    if configured.binds and reported != allowed:
        shown = idset.encode(reported) or "none"
        note = (
            f"{ATTRIBUTE}={value} ignored: this broker reports cores {shown} but may run on "
            f"{idset.encode(allowed)} (a CPU quota, not a cpuset): not its own to bind to"
        )
        return Affinity("off"), note
    return configured, ""


def job_affinity(shell_options: ShellOptions, default: Affinity) -> Affinity:
    """The job's own option if it set one, else the instance's default."""
    if OPTION in shell_options:
        return parse_affinity(shell_options[OPTION])
    return default


def checked_job_affinity(
    shell_options: ShellOptions, default: Affinity, ntasks: int, rank: int, allowed: set[int]
) -> Affinity:
    """The job's affinity (job_affinity), refused (AffinityError, naming the option) when a map: has fewer entries
    than the rank's `ntasks` (0: not checked, its tasks are not started here one by one) or an entry names no CPU
    in `allowed`, so nothing starts."""
    affinity = job_affinity(shell_options, default)
    if not affinity.mapped:
        return affinity
    where = f"-o {OPTION}={affinity.mode}"
    entries = affinity.mode[4:].split(";")
    if len(entries) < ntasks:
        raise AffinityError(f"{where}: {len(entries)} entries for {ntasks} tasks on rank {rank}")
    if (bad := unusable_map_entry(affinity.mode, allowed)) is not None:
        raise AffinityError(f"{where}: {bad} has no CPU rank {rank} may run on")
    return affinity


def job_cpus(affinity: Affinity, allocated: tuple[int, ...], rank: int) -> tuple[tuple[int, ...], str]:
    """The allocated cores this broker may bind the job's tasks to (none when it does not bind), and the note for
    the job's stderr when it binds to its allocation but can use none of it (fake slots: tasks unbound)."""
    if not affinity.binds:
        return (), ""
    cpus = usable(allocated)
    if cpus or affinity.mapped:
        return cpus, ""
    return cpus, f"flux-shell[{rank}]: cpu-affinity: this broker cannot use the job's cores: tasks unbound\n"


def unusable_map_entry(mode: str, allowed: set[int]) -> str | None:
    """For map:LIST, what names an entry with no CPU this process may run on ('entry 2 (cpus 7)'), else None."""
    if not mode.startswith("map:"):
        return None
    for index, entry in enumerate(mode[4:].split(";")):
        if not set(_parse_map_entry(entry)) & allowed:
            return f"entry {index} (cpus {entry})"
    return None


def usable(cores: tuple[int, ...] | list[int], allowed: set[int] | None = None) -> tuple[int, ...]:
    """The allocated cores this process may really bind to (fake slot numbers dropped)."""
    mine = os.sched_getaffinity(0) if allowed is None else allowed
    return tuple(sorted(set(cores) & mine))


def encode_cores(cores: Mapping[int, tuple[int, ...]]) -> str:
    return " ".join(f"{rank}:{idset.encode(c)}" for rank, c in sorted(cores.items()) if c)


MAX_CPU_ID = 65535
"""The highest CPU number a map: entry may name (Linux builds for at most 8,192 CPUs): `map:0-999999999999` is
refused by its ranges, before a list of its ids would fill the broker's memory."""


def _parse_map_entry(entry: str) -> tuple[int, ...]:
    """One task's CPUs of `map:0-1;2`: a non-empty CPU list."""
    if any(last > MAX_CPU_ID for _first, last in idset.ranges(entry)):
        raise ValueError(f"{entry!r} names a CPU above {MAX_CPU_ID}")
    cpus = tuple(idset.decode(entry))
    if not cpus:
        raise ValueError(f"{entry!r} is not a CPU list such as 0-3,6")
    return cpus


def decode_cores(text: str, rank: int) -> tuple[int, ...]:
    """This rank's cores from CORES_VARIABLE ('0:0-1 1:2'); () if it has none or the text is not ours."""
    for item in text.split():
        key, _, cpus = item.partition(":")
        if key == str(rank):
            try:
                return tuple(idset.decode(cpus))
            except ValueError:
                return ()
    return ()


@contextlib.contextmanager
def forked_on(cpus: tuple[int, ...]) -> Iterator[None]:
    """Fork children inside this block bound to `cpus`: the calling thread's mask is narrowed, then restored.

    A child inherits the mask of the thread that forks it, and binding before exec (not after) also binds
    every thread the task will start. Only this thread's mask changes (sched_setaffinity(0) is per thread).
    """
    if not cpus:
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def mpirun_wrapper(affinity: Affinity) -> list[str]:
    """The words before a rank's command that bind it to its own share (per-task, map:) on its host."""
    flags = (["-v"] if affinity.verbose else []) + (["-n"] if affinity.dry_run else [])
    return [sys.executable, "-I", "-S", str(Path(task_bind.__file__).resolve()), affinity.mode, *flags, "--"]


def carry_preload(exports: Mapping[str, str]) -> dict[str, str]:
    """The profiler's variables for ranks run through the wrapper: LD_PRELOAD travels under another name."""
    moved = dict(exports)
    if "LD_PRELOAD" in moved:
        moved[task_bind.PRELOAD_CARRIER] = moved.pop("LD_PRELOAD")
    return moved


def describe(rank: int, what: str, cpus: tuple[int, ...], dry_run: bool) -> str:
    """The verbose line for one process job-exec starts ('task 3', 'mpi': mpirun and the ranks it forks here)."""
    shown = idset.encode(cpus) if cpus else "unbound"
    return f"flux-shell[{rank}]: cpu-affinity{' (dry run)' if dry_run else ''}: {what}: cpus {shown}\n"
