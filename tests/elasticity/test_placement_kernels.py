"""The placement kernels run for real under mpirun, report their counters, and profile into their classes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from elasticity.policy.placement import mpi_fraction_from_duty, profile_class
from elasticity.policy.placement.profile_class import CommunicationProfile
from elasticity.profiling.duty_cycle import analyze_job
from elasticity.profiling.trace import read_job_traces
from elasticity.workloads.placement_kernels import DECLARED_CLASS, build_placement_kernels, parse_report


@pytest.fixture(scope="module")
def kernels(tmp_path_factory: pytest.TempPathFactory, pmpi_library: Path) -> Path:
    return build_placement_kernels(tmp_path_factory.mktemp("kernels"))


@pytest.mark.parametrize(
    ("kind", "n", "iterations", "expected"),
    [("dgemm", 96, 20, "cpu"), ("triad", 400_000, 30, "memory"), ("ring", 1_000_000, 100, "network")],
)
@pytest.mark.serial
def test_each_kernel_profiles_into_its_class(
    kernels: Path, run_mpi: Callable[..., Any], tmp_path: Path, kind: str, n: int, iterations: int, expected: str
) -> None:
    result = run_mpi([kernels, kind, n, iterations], tmp_path, np=2, jobid=kind)
    assert result.returncode == 0, result.stderr
    report = parse_report(result.stdout)
    assert report.kind == kind and [r.rank for r in report.ranks] == [0, 1]
    assert all(r.ctx_switches >= 0 and r.migrations >= 0 and r.seconds > 0 for r in report.ranks)
    sent = [r.bytes_sent for r in report.ranks]
    assert sent == ([float(n * iterations)] * 2 if kind == "ring" else [0.0, 0.0])
    analysis = analyze_job(read_job_traces(tmp_path, jobid=kind))  # PMPI: one MPI_Barrier per iteration
    assert analysis.iterations == (iterations + 1,) * 2  # the barrier before the loop ends a first, short one
    measured = CommunicationProfile(
        mpi_fraction_from_duty([float(d) for d in analysis.duty]), report.communication().bytes_per_second
    )
    assert profile_class(DECLARED_CLASS[kind], measured) == expected


def test_bad_arguments_exit_2(kernels: Path, run_mpi: Callable[..., Any]) -> None:
    result = run_mpi([kernels, "fft", 10, 10], None, np=1, profile=False)
    assert result.returncode != 0 and "usage" in result.stderr
