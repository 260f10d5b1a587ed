"""Every shell block the documentation marks as runnable runs as written, so a doc that stops working fails CI.

The marker is an HTML comment on the line right before a ```bash (or ```sh) fence, in README.md or docs/**/*.md:

    <!-- runnable -->
    ```bash
    minicluster up examples/hello.yaml
    ```

Both GitHub and MkDocs render the comment as nothing. Each block runs on its own under `bash -e -o pipefail`, in a
fresh directory holding `examples/` and `images/` (as from the repository root), with the virtualenv first on PATH
as `source .venv/bin/activate` gives, a fresh program cache and none of the caller's OMPI_/FLUX_/MINICLUSTER_
variables (a fresh shell: no Open MPI opt-ins)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
MARKER = "<!-- runnable -->"
FENCE = re.compile(r"^```(bash|sh)\b")
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


@dataclass(frozen=True)
class Block:
    page: str  # relative to the repository root
    line: int  # of the opening fence, 1-based
    script: str

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def doc_pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def runnable_blocks(path: Path, page: str = "") -> list[Block]:
    """The marked blocks of one page; a marker not followed by a shell fence, or an unclosed fence, is an error."""
    page = page or str(path.relative_to(ROOT))
    lines = path.read_text().splitlines()
    blocks = []
    fence_open = ""  # the backticks of the fence we are inside (an example of the marker is not a marker)
    for index, line in enumerate(lines):
        ticks = re.match(r"^\s*(`{3,})", line)
        if fence_open:
            if ticks and ticks.group(1).startswith(fence_open) and not line.strip()[len(ticks.group(1)) :]:
                fence_open = ""
            continue
        if ticks:
            fence_open = ticks.group(1)
            continue
        if line.strip() != MARKER:
            continue
        fence = index + 1
        if fence >= len(lines) or not FENCE.match(lines[fence]):
            raise ValueError(f"{page}:{index + 1}: {MARKER} must be followed at once by a ```bash or ```sh fence")
        end = next((i for i in range(fence + 1, len(lines)) if lines[i].startswith("```")), None)
        if end is None:
            raise ValueError(f"{page}:{fence + 1}: the runnable block is never closed")
        blocks.append(Block(page, fence + 1, "\n".join(lines[fence + 1 : end]) + "\n"))
    return blocks


def all_blocks() -> list[Block]:
    return [block for path in doc_pages() for block in runnable_blocks(path)]


def test_markers_are_well_formed_and_the_examples_stay_covered() -> None:
    counts: dict[str, int] = {}
    for block in all_blocks():
        assert block.script.strip(), f"{block.id}: an empty runnable block"
        counts[block.page] = counts.get(block.page, 0) + 1
    for page, least in AT_LEAST.items():
        assert counts.get(page, 0) >= least, f"{page}: {counts.get(page, 0)} runnable blocks, expected {least}"


def test_a_misplaced_marker_is_named(tmp_path: Path) -> None:
    page = tmp_path / "probe.md"
    page.write_text(f"text\n\n{MARKER}\n\n```bash\ntrue\n```\n")
    with pytest.raises(ValueError, match=r"docs/probe\.md:3: .* must be followed"):
        runnable_blocks(page, "docs/probe.md")
    page.write_text(f"{MARKER}\n```sh\ntrue\n")
    with pytest.raises(ValueError, match="never closed"):
        runnable_blocks(page, "docs/probe.md")
    page.write_text(f"{MARKER}\n```sh\necho one\n```\n\n```bash\nnot marked\n```\n")
    assert runnable_blocks(page, "docs/probe.md") == [Block("docs/probe.md", 2, "echo one\n")]
    page.write_text(f"````markdown\n{MARKER}\n```bash\nan example of the marker\n```\n````\n")
    assert runnable_blocks(page, "docs/probe.md") == []


@pytest.mark.needs_root
@pytest.mark.parametrize("block", all_blocks(), ids=lambda block: block.id)
def test_runnable_block_runs_as_written(block: Block, machine: Any, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    for shared in ("examples", "images"):
        (work / shared).symlink_to(ROOT / shared)
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
