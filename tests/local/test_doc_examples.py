"""Every shell block the documentation marks as runnable runs as written, so a doc that stops working fails CI.

The marker is an HTML comment on the line right before a ```bash (or ```sh) fence, in README.md or docs/**/*.md
(docsgen/shell_blocks.py reads them; tests/docs/test_shell_blocks.py fails on a block neither runnable nor marked
`<!-- not run: REASON -->`):

    <!-- runnable -->
    ```bash
    minicluster up examples/hello.yaml
    ```

Both GitHub and MkDocs render the comment as nothing. Each block runs on its own under `bash -e -o pipefail`, in a
fresh directory holding `examples/`, `images/`, `bench/` and `.venv` (as from the repository root), with the
virtualenv first on PATH as `source .venv/bin/activate` gives, a fresh program cache and none of the caller's
OMPI_/FLUX_/MINICLUSTER_ variables (a fresh shell: no Open MPI opt-ins)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from docsgen.shell_blocks import ShellBlock, runnable_blocks

ROOT = Path(__file__).resolve().parents[2]
#: The pages whose examples the tests ran before the marker existed (as README sections): removing a marker from
#: one of them must be a decision, not an accident.
AT_LEAST = {
    "README.md": 1,
    "docs/getting-started.md": 1,
    "docs/local.md": 1,
    "docs/jobs.md": 1,
    "docs/rest.md": 1,
    "docs/tenants.md": 1,
    "docs/web.md": 1,
    "docs/profiling.md": 3,
    "docs/save-restore.md": 1,
}


def test_markers_are_well_formed_and_the_examples_stay_covered() -> None:
    counts: dict[str, int] = {}
    for block in runnable_blocks():
        assert block.script.strip(), f"{block.id}: an empty runnable block"
        counts[block.page] = counts.get(block.page, 0) + 1
    for page, least in AT_LEAST.items():
        assert counts.get(page, 0) >= least, f"{page}: {counts.get(page, 0)} runnable blocks, expected {least}"


@pytest.mark.needs_root
@pytest.mark.parametrize("block", runnable_blocks(), ids=lambda block: block.id)
def test_runnable_block_runs_as_written(block: ShellBlock, machine: Any, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    for shared in ("examples", "images", "bench"):
        (work / shared).symlink_to(ROOT / shared)
    (work / ".venv").symlink_to(Path(sys.executable).parent.parent)  # `.venv/bin/python` as from the checkout
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "FLUX_", "MINICLUSTER_"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', os.defpath)}"
    env["VIRTUAL_ENV"] = str(Path(sys.executable).parent.parent)
    env["MINICLUSTERS_CACHE_DIR"] = str(tmp_path / "cache")
    run = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", block.script],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    machine.remember()
    assert run.returncode == 0, f"{block.id} exited {run.returncode}:\n{run.stdout}\n{run.stderr}"
