"""The campaign's plan, pure: which members exist, where their cases live, and each ensemble's batch script.

Everything here is computed from the spec and paths alone, so it is unit-tested without OpenFOAM or a cluster.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from miniclusters.api.campaign import CampaignSpec

BOUNDARY = "MPI_Allreduce"
"""rhoSimpleFoam v1912 never calls MPI_Barrier: every reduction ends a profiling window."""
SOLVER = "rhoSimpleFoam"
#: Files the batch script writes per member, read by the controller (the sub-instance may be gone by then).
SUBMITTED = "submitted"
ENDED = "ended"


@dataclass(frozen=True)
class Member:
    """One case of a sweep: its ensemble, the swept value and its directory."""

    ensemble: str
    index: int
    parameter: str
    value: float
    directory: Path

    @property
    def name(self) -> str:
        return f"{self.ensemble}-{self.index}"


@dataclass(frozen=True)
class Ensemble:
    name: str
    parameter: str
    nodes: int
    members: tuple[Member, ...]
    directory: Path

    @property
    def script(self) -> Path:
        return self.directory / "batch.sh"


@dataclass(frozen=True)
class CampaignPlan:
    ranks: int
    iterations: int
    profile_iterations: int
    sequential: bool
    workdir: Path
    ensembles: tuple[Ensemble, ...]

    @property
    def members(self) -> tuple[Member, ...]:
        return tuple(m for e in self.ensembles for m in e.members)

    def ensemble(self, name: str) -> Ensemble:
        for e in self.ensembles:
            if e.name == name:
                return e
        raise KeyError(name)


def plan_campaign(spec: CampaignSpec, workdir: Path) -> CampaignPlan:
    """Members in spec order: `<workdir>/<ensemble>/<ensemble>-<i>` for the i-th value of each sweep."""
    ensembles = []
    for e in spec.ensembles:
        folder = workdir / e.name
        members = tuple(
            Member(e.name, i, e.parameter, float(v), folder / f"{e.name}-{i}") for i, v in enumerate(e.values)
        )
        ensembles.append(Ensemble(e.name, e.parameter, e.nodes, members, folder))
    return CampaignPlan(
        spec.ranks, spec.iterations, spec.profile_iterations, spec.sequential, workdir, tuple(ensembles)
    )


def member_submit(member: Member, ranks: int, nodes: int, profile_iterations: int) -> list[str]:
    """`flux submit` of one member inside its ensemble's sub-instance, profiled by PMPI after K windows."""
    d = member.directory
    return [
        "flux",
        "submit",
        "--flags=waitable",  # the script's `flux job wait ID` needs it under flux-core
        "-N",
        str(min(nodes, ranks)),
        "-n",
        str(ranks),
        "-o",
        "mpi=openmpi",
        "-o",
        "mpi-wait=sleep",
        "-o",
        f"pmpi={profile_iterations}",
        "-o",
        f"pmpi-dir={d / 'pmpi'}",
        "-o",
        f"pmpi-boundary={BOUNDARY}",
        f"--job-name={member.name}",
        f"--output={d / ('log.' + SOLVER)}",
        f"--error={d / 'error.txt'}",
        f"--cwd={d}",
        f"--env=MC_PROGRESS_FILE={d / 'progress.log'}",
        SOLVER,
        "-parallel",
        "-case",
        str(d),
    ]


def batch_script(ensemble: Ensemble, ranks: int, profile_iterations: int, env: Mapping[str, str]) -> str:
    """The ensemble's `flux batch` script: submit every member, then wait for each and record how it ended.

    Each member's job id (`submitted`) and exit code with its end time (`ended`) land in its directory as they
    happen, so the controller knows every member's fate even after the sub-instance is gone; one member failing
    never stops the others (the script waits for all of them).
    """
    lines = ["#!/bin/sh", f"# ensemble {ensemble.name}: {len(ensemble.members)} members, written by minicluster"]
    lines += [f"export {k}={shlex.quote(v)}" for k, v in sorted(env.items())]
    for m in ensemble.members:
        d = shlex.quote(str(m.directory))
        submit = shlex.join(member_submit(m, ranks, ensemble.nodes, profile_iterations))
        lines.append(f'id_{m.index}=$({submit}) && echo "$id_{m.index} $(date +%s.%N)" > {d}/{SUBMITTED}')
    for m in ensemble.members:
        d = shlex.quote(str(m.directory))
        lines.append(
            f'if [ -n "$id_{m.index}" ]; then flux job wait "$id_{m.index}"; rc=$?; else rc=127; fi; '
            f'echo "$rc $(date +%s.%N)" > {d}/{ENDED}'
        )
    lines.append("exit 0")
    return "\n".join(lines) + "\n"


def script_exports(script: str) -> dict[str, str]:
    """The environment a batch script exports (its `export K=V` lines, as `batch_script` writes them): a rerun's
    script exports what the prepared one did, even where the runner has no OpenFOAM of its own."""
    out = {}
    for line in script.splitlines():
        if line.startswith("export "):
            words = shlex.split(line.removeprefix("export "))
            if len(words) == 1 and "=" in words[0]:
                key, value = words[0].split("=", 1)
                out[key] = value
    return out


RESULT_FILES = (SUBMITTED, ENDED, f"log.{SOLVER}", "error.txt", "progress.log")
RESULT_DIRS = ("pmpi", "postProcessing")


def reset_member(member: Member, workdir: Path) -> None:
    """Forget a run of the member (its records, log, traces, coefficients) so it can run again; the case stays.
    Only inside the work directory: a symlink leading out of it is an OSError, and nothing is deleted there."""
    from miniclusters.workdirs import remove_file, remove_tree

    for name in RESULT_FILES:
        remove_file(member.directory / name, workdir)
    for name in RESULT_DIRS:
        remove_tree(member.directory / name, workdir)
    (member.directory / "pmpi").mkdir(exist_ok=True)


def batch_submit(ensemble: Ensemble, flux: Sequence[str]) -> list[str]:
    """`flux batch -N nodes` of the ensemble's script."""
    argv = [*flux, "batch", "-N", str(ensemble.nodes), f"--job-name={ensemble.name}"]
    argv += [f"--output={ensemble.directory / 'batch.out'}", f"--error={ensemble.directory / 'batch.err'}"]
    return [*argv, str(ensemble.script)]
