"""The README's local-backend, jobs, REST, users, web and profiling blocks run as written (in a fresh directory,
with the virtualenv first on PATH as `source .venv/bin/activate` gives, a fresh program cache and no Open MPI
opt-ins)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SECTIONS = {
    "local": "## Running a MiniCluster on this machine (local backend)",
    "jobs": "## Jobs: `flux submit` inside a MiniCluster",
    "rest": "## REST API on the lead broker",
    "users": "## Users and tenants",
    "web": "## Web interface",
    "profiling": "## Profiling MPI duty cycles",
    "save": "## Saving the queue and restoring it into a cluster of another size",
}


def readme_blocks(heading: str) -> list[str]:
    text = (ROOT / "README.md").read_text()
    start = text.index(heading + "\n")
    end = text.find("\n## ", start + len(heading))
    section = text[start : end if end != -1 else len(text)]
    return re.findall(r"```bash\n(.*?)```", section, re.DOTALL)


def test_every_section_has_a_block() -> None:
    for heading in SECTIONS.values():
        assert readme_blocks(heading), heading


@pytest.mark.needs_root
@pytest.mark.parametrize("section", sorted(SECTIONS))
def test_readme_block_runs_as_written(section: str, machine: Any, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "examples").symlink_to(ROOT / "examples")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "FLUX_", "MINICLUSTER_"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', os.defpath)}"
    env["VIRTUAL_ENV"] = str(Path(sys.executable).parent.parent)
    env["MINICLUSTERS_CACHE_DIR"] = str(tmp_path / "cache")
    for number, block in enumerate(readme_blocks(SECTIONS[section])):
        run = subprocess.run(
            ["bash", "-e", "-o", "pipefail", "-c", block],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
        )
        machine.remember()
        assert run.returncode == 0, f"{section} block {number} exited {run.returncode}:\n{run.stdout}\n{run.stderr}"
