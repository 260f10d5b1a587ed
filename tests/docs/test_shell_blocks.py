"""Every shell block of README.md and docs/ is run by tests/local/test_doc_examples.py or says why not; a reason
that names a test names one that exists; a misplaced marker is named with its line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from docsgen import benchmarks
from docsgen.shell_blocks import ROOT, RUNNABLE, ShellBlock, all_shell_blocks, named_tests, shell_blocks


def test_every_shell_block_is_run_or_says_why_not() -> None:
    unmarked = [block.id for block in all_shell_blocks() if not block.marked]
    assert not unmarked, (
        "shell blocks neither run nor marked: put `<!-- runnable -->` (a few seconds, local backend, no images) "
        f"or `<!-- not run: REASON -->` on the line before each fence: {unmarked}"
    )


def test_a_reason_naming_a_test_names_one_that_exists() -> None:
    missing = []
    for block in all_shell_blocks():
        for file, function in named_tests(block.reason):
            path = ROOT / file
            defined = rf"^(async )?def {function}\b"
            if not path.is_file() or (function and not re.search(defined, path.read_text(), re.M)):
                missing.append(f"{block.id}: {file}::{function}")
    assert not missing, missing


def test_the_generated_benchmarks_page_marks_its_commands() -> None:
    page = benchmarks.render(benchmarks.load())
    assert page.count("<!-- not run: ") == page.count("```bash")


def test_a_misplaced_marker_is_named(tmp_path: Path) -> None:
    page = tmp_path / "probe.md"
    page.write_text(f"text\n\n{RUNNABLE}\n\n```bash\ntrue\n```\n")
    with pytest.raises(ValueError, match=r"docs/probe\.md:3: .* followed at once"):
        shell_blocks(page, "docs/probe.md")
    page.write_text(f"{RUNNABLE}\n```sh\ntrue\n")
    with pytest.raises(ValueError, match="never closed"):
        shell_blocks(page, "docs/probe.md")
    page.write_text(f"{RUNNABLE}\n```console\n$ true\n```\n")
    with pytest.raises(ValueError, match="transcript"):
        shell_blocks(page, "docs/probe.md")
    page.write_text(f"{RUNNABLE}\n```sh\necho one\n```\n\n<!-- not run: needs a cluster -->\n```bash\nkubectl\n```\n")
    assert shell_blocks(page, "docs/probe.md") == [
        ShellBlock("docs/probe.md", 2, "sh", "echo one\n", runnable=True),
        ShellBlock("docs/probe.md", 7, "bash", "kubectl\n", reason="needs a cluster"),
    ]
    page.write_text(f"````markdown\n{RUNNABLE}\n```bash\nan example of the marker\n```\n````\n\n```sh\nls\n```\n")
    assert shell_blocks(page, "docs/probe.md") == [ShellBlock("docs/probe.md", 8, "sh", "ls\n")]


def test_named_tests_are_read_from_a_reason() -> None:
    reason = "minutes; tests/local/test_x.py::test_y runs the same, and tests/podman/test_z.py"
    assert named_tests(reason) == [("tests/local/test_x.py", "test_y"), ("tests/podman/test_z.py", "")]
