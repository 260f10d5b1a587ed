"""README examples run as written on a fresh clone: the local backend builds the image's programs (mpi-hello)
into a cache on first use, with a progress line, and gives pods the image's environment."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from miniclusters.backends.local import programs

ROOT = Path(__file__).resolve().parents[2]


def test_image_names_and_the_dockerfile_environment() -> None:
    assert programs.image_name("ghcr.io/miniclusters/openmpi-openfoam:0.1.0") == "openmpi-openfoam"
    assert programs.image_name("localhost:5000/mc/openmpi-openfoam@sha256:abc") == "openmpi-openfoam"
    recipe = programs.recipe_for("ghcr.io/miniclusters/openmpi-openfoam:0.1.0")
    assert recipe is not None and [s.name for s in recipe.sources] == ["mpi-hello.c"]
    assert recipe.environment["OMPI_ALLOW_RUN_AS_ROOT"] == "1"
    assert recipe.environment["OMPI_MCA_btl_vader_single_copy_mechanism"] == "none"
    assert programs.recipe_for("busybox:1.36") is None
    legacy = "FROM a AS b\nENV IGNORED=1\nFROM c\nENV A=1 \\\n    B='two words'\nENV C 3 4\n"
    assert programs.dockerfile_environment(legacy) == {"A": "1", "B": "two words", "C": "3 4"}


def test_programs_are_built_once_and_run(tmp_path: Path) -> None:
    recipe = programs.recipe_for("ghcr.io/miniclusters/openmpi-openfoam:0.1.0")
    assert recipe is not None
    said: list[str] = []
    bindir = programs.build_programs(recipe, tmp_path, said.append)
    assert bindir is not None and len(said) == 1 and "building mpi-hello" in said[0]
    assert programs.build_programs(recipe, tmp_path, said.append) == bindir and len(said) == 1  # cached
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    run = subprocess.run([str(bindir / "mpi-hello")], capture_output=True, text=True, env=env, timeout=60)
    assert run.returncode == 0 and "hello from rank 0 of 1" in run.stdout, run.stderr


def test_a_missing_compiler_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    recipe = programs.recipe_for("ghcr.io/miniclusters/openmpi-openfoam:0.1.0")
    assert recipe is not None
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(programs.ProgramBuildError, match="needs `mpicc`"):
        programs.build_programs(recipe, tmp_path / "cache", lambda _m: None)


@pytest.mark.needs_root
def test_readme_hello_runs_as_written(machine: Any, minicluster_bin: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OMPI_")}  # a fresh shell: no Open MPI opt-ins
    env["MINICLUSTERS_CACHE_DIR"] = str(tmp_path / "cache")
    first = subprocess.run(
        [minicluster_bin, "up", "examples/hello.yaml"], cwd=ROOT, capture_output=True, text=True, env=env, timeout=180
    )
    assert first.returncode == 0, first.stdout + first.stderr
    assert "building mpi-hello" in first.stderr
    assert {f"hello from rank {r} of 4 on hello-{r}" for r in range(4)} <= set(first.stdout.splitlines())
    again = subprocess.run(
        [minicluster_bin, "up", "examples/hello.yaml"], cwd=ROOT, capture_output=True, text=True, env=env, timeout=180
    )
    assert again.returncode == 0 and "building" not in again.stderr, again.stderr
