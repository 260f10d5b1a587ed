"""The NACA0012 case for real: preparation, bounded runs, a simple decomposition run in parallel, errors."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from broker.testing import require_tool
from elasticity.workloads.foam import (
    FoamError,
    foam_variables,
    get_entry,
    read_label_list,
    run_tool,
    set_entries,
    write_label_list,
)
from elasticity.workloads.openfoam import (
    SOLVER,
    Case,
    copy_case,
    decompose,
    end_time,
    find_naca0012_source,
    prepare_naca0012,
    run_solver,
    set_end_time,
    solver_command,
    solver_iterations,
)

NACA0012_CELLS = 16_000  # REFERENCE.md section 5


def test_prepared_mesh_has_the_reference_cell_count(naca0012_case: Case) -> None:
    assert naca0012_case.n_cells == NACA0012_CELLS
    path = naca0012_case.path
    assert not list(path.rglob("*.gz"))  # everything was gunzipped
    for tool in ("blockMesh", "transformPoints", "extrudeMesh"):
        assert (path / f"log.{tool}").read_text().rstrip().endswith("End")
    boundary = (path / "constant" / "polyMesh" / "boundary").read_text()
    assert "aerofoil" in boundary and "front" in boundary  # extrudeMesh exposed the front patch


def test_set_end_time_bounds_the_run_without_writing(naca0012_case: Case, tmp_path: Path) -> None:
    case = copy_case(naca0012_case, tmp_path / "case")
    set_end_time(case, 7)
    assert end_time(case) == 7
    assert get_entry(case.control_dict, "startFrom") == "startTime"
    assert int(get_entry(case.control_dict, "writeInterval") or 0) > 1_000_000
    assert get_entry(case.control_dict, "application") == SOLVER  # the rest is untouched
    set_end_time(case, 9, write=True)
    assert end_time(case) == 9


def test_simple_decomposition_runs_in_parallel(
    naca0012_case: Case, tmp_path: Path, mpi_environment: dict[str, str]
) -> None:
    case = copy_case(naca0012_case, tmp_path / "case")
    set_end_time(case, 5)
    split = decompose(case, 4, "simple")
    assert sum(split.cells_per_processor) == NACA0012_CELLS
    assert max(split.cells_per_processor) - min(split.cells_per_processor) <= 0.01 * NACA0012_CELLS
    assert sorted(p.name for p in case.path.glob("processor*")) == [f"processor{i}" for i in range(4)]

    command = solver_command(case, 4)
    assert command[:3] == ["mpirun", "-np", "4"]
    assert command[-4:] == [SOLVER, "-parallel", "-case", str(case.path)]
    # The argv carries the OpenFOAM environment itself: run it with a plain MPI environment.
    env = {k: v for k, v in mpi_environment.items() if not k.startswith(("WM_", "FOAM_"))}
    log = run_solver(command, case, env=env, timeout=120)
    text = log.read_text()
    assert "nProcs : 4" in text
    assert solver_iterations(log) == 5
    assert not [p for p in case.path.iterdir() if p.name not in ("0",) and p.name.replace(".", "").isdigit()]


def test_hierarchical_decomposition_balances_cells(naca0012_case: Case, tmp_path: Path) -> None:
    case = copy_case(naca0012_case, tmp_path / "case")
    split = decompose(case, 6, "hierarchical")
    assert len(split.cells_per_processor) == 6 and sum(split.cells_per_processor) == NACA0012_CELLS


def test_dictionary_and_list_helpers(tmp_path: Path) -> None:
    d = tmp_path / "controlDict"
    d.write_text(
        "FoamFile\n{\n    version     2.0;\n    object controlDict;\n}\nendTime 1000;\nsub\n{\n    endTime 3;\n}\n"
    )
    set_entries(d, {"endTime": 12, "newKey": "abc"})
    text = d.read_text()
    assert get_entry(d, "endTime") == "12" and "    endTime 3;" in text and get_entry(d, "newKey") == "abc"
    assert "version     2.0;" in text
    labels = tmp_path / "list"
    write_label_list(labels, np.array([3, 0, 2, 1]), "list")
    assert read_label_list(labels).tolist() == [3, 0, 2, 1]


def test_a_failing_step_names_the_tool_and_shows_its_log(tmp_path: Path) -> None:
    require_tool("blockMesh", "openfoam")
    case = tmp_path / "broken"
    (case / "system").mkdir(parents=True)
    (case / "constant").mkdir()
    with pytest.raises(FoamError, match=r"blockMesh failed \(exit \d+\)") as err:
        run_tool(case, "blockMesh")
    assert "FOAM FATAL" in str(err.value)  # the tail of log.blockMesh
    with pytest.raises(FoamError, match="'noSuchFoamTool' not found"):
        run_tool(case, "noSuchFoamTool")


def test_missing_openfoam_is_reported(tmp_path: Path) -> None:
    with pytest.raises(FoamError, match="not found"):
        foam_variables(tmp_path / "no-bashrc")
    fake = tmp_path / "bashrc"
    fake.write_text("export SOMETHING=else\n")
    with pytest.raises(FoamError, match="did not set WM_PROJECT_DIR"):
        foam_variables(fake)
    with pytest.raises(FoamError, match="openfoam-examples"):
        find_naca0012_source(tmp_path)


def test_prepare_refuses_a_non_empty_destination(tmp_path: Path) -> None:
    (tmp_path / "dest").mkdir()
    (tmp_path / "dest" / "file").write_text("x")
    with pytest.raises(FileExistsError):
        prepare_naca0012(tmp_path / "dest", source=tmp_path)


def test_solver_command_adds_extra_mpi_args_before_the_solver(tmp_path: Path) -> None:
    require_tool("blockMesh", "openfoam")
    cmd = solver_command(tmp_path, 16, ["--bind-to", "none"], allow_run_as_root=False)
    assert "--allow-run-as-root" not in cmd
    assert cmd[cmd.index(SOLVER) - 2 : cmd.index(SOLVER)] == ["--bind-to", "none"]
    assert f"WM_PROJECT_DIR={foam_variables()['WM_PROJECT_DIR']}" in cmd
    assert ("--allow-run-as-root" in solver_command(tmp_path, 2)) == (os.geteuid() == 0)
