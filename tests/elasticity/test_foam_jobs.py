"""NACA0012 cases as launcher jobs (elasticity/workloads/foam_jobs.py): the finer mesh, the fixed iteration count,
and the rank script that gives every job its own copy of the case however its ranks race."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from broker.testing import require_path
from elasticity.workloads.foam import FoamError
from elasticity.workloads.foam_jobs import JOB_CASE, job_command, without_residual_control
from elasticity.workloads.openfoam import Case, gunzip_tree, refine_block_mesh

TUTORIAL = Path("/usr/share/doc/openfoam-examples/examples/compressible/rhoSimpleFoam/aerofoilNACA0012")


@pytest.fixture
def tutorial_system(tmp_path: Path) -> Path:
    """The tutorial's system/ (gunzipped), without meshing anything."""
    require_path(TUTORIAL / "system", "openfoam-examples")
    shutil.copytree(TUTORIAL / "system", tmp_path / "system")
    for p in (tmp_path / "system").iterdir():
        p.chmod(0o644)
    gunzip_tree(tmp_path)
    return tmp_path


def test_refine_multiplies_every_block_count_and_keeps_the_gradings(tutorial_system: Path) -> None:
    before = (tutorial_system / "system" / "blockMeshDict").read_text()
    refine_block_mesh(tutorial_system, 3)
    after = (tutorial_system / "system" / "blockMeshDict").read_text()
    for name, cells in (("zCells", 80), ("xUCells", 30), ("xMCells", 30), ("xDCells", 40)):
        assert re.search(rf"^\s+{name}\s+{cells};", before, re.MULTILINE)
        assert re.search(rf"^\s+{name}\s+{cells * 3};", after, re.MULTILINE)
    assert before.count("Grading") == after.count("Grading") and "zGrading    40;" in after


def test_refine_refuses_a_dictionary_without_the_four_counts(tmp_path: Path) -> None:
    (tmp_path / "system").mkdir()
    (tmp_path / "system" / "blockMeshDict").write_text("domain\n{\n    zCells 80;\n}\n")
    with pytest.raises(FoamError, match="4 block cell counts"):
        refine_block_mesh(tmp_path, 2)
    assert "zCells 80;" in (tmp_path / "system" / "blockMeshDict").read_text()  # nothing changed


def test_without_residual_control_keeps_the_rest_of_simple(tutorial_system: Path) -> None:
    case = Case(tutorial_system, 16_000)
    without_residual_control(case)
    text = (tutorial_system / "system" / "fvSolution").read_text()
    assert "residualControl" not in text
    simple = text.split("SIMPLE", 1)[1].split("}", 1)[0]
    assert "nNonOrthogonalCorrectors 0;" in simple and "pMaxFactor" in simple
    assert "relaxationFactors" in text and "GAMG" in text


def _fake_case(root: Path) -> Path:
    base = root / "prepared"
    (base / "processor0").mkdir(parents=True)
    (base / "processor0" / "mesh").write_text("cells\n" * 10_000)
    (base / "system").mkdir()
    (base / "system" / "controlDict").write_text("endTime 4;\n")
    return base


def test_every_rank_of_a_job_runs_in_the_one_complete_copy(tmp_path: Path) -> None:
    """Eight ranks started at once in the job's directory: one copy wins, the others' are removed, all run in it."""
    base = _fake_case(tmp_path)
    argv = job_command(base, ["EXTRA=1"], solver=("sh", "-c", 'echo "$EXTRA $WM_PROJECT $*"; ls "$2"', "solver"),
                       variables={"WM_PROJECT": "OpenFOAM"})  # fmt: skip
    job = tmp_path / "job"
    job.mkdir()
    ranks = [subprocess.Popen(argv, cwd=job, stdout=subprocess.PIPE, text=True) for _ in range(8)]
    outputs = [rank.communicate(timeout=30)[0] for rank in ranks]
    assert all(rank.returncode == 0 for rank in ranks)
    copy = job / JOB_CASE
    assert {out.splitlines()[0] for out in outputs} == {f"1 OpenFOAM -case {copy}"}
    assert all(sorted(out.split()[4:]) == ["processor0", "system"] for out in outputs), outputs
    assert sorted(p.name for p in job.iterdir()) == [JOB_CASE], "the losers' copies are gone"
    assert (copy / "processor0" / "mesh").read_text() == (base / "processor0" / "mesh").read_text()
    # a second job elsewhere gets its own copy; the prepared case is never written
    other = tmp_path / "other"
    other.mkdir()
    subprocess.run(argv, cwd=other, check=True, capture_output=True)
    assert (other / JOB_CASE / "system" / "controlDict").is_file()
    assert sorted(p.name for p in base.iterdir()) == ["processor0", "system"]


def test_job_command_refuses_an_undecomposed_case_and_bad_variables(tmp_path: Path) -> None:
    with pytest.raises(FoamError, match="not decomposed"):
        job_command(tmp_path, variables={})
    base = _fake_case(tmp_path)
    with pytest.raises(ValueError, match="extra_env: NAME=value expected, got 'NOVALUE'"):
        job_command(base, ["NOVALUE"], variables={})
    with pytest.raises(ValueError, match="extra_env"):
        job_command(base, ["=x"], variables={})
