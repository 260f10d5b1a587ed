"""The shell blocks of the documentation and what each one says about itself: run by the tests, or not run and why.

A shell block is a fence of `bash`, `sh`, `shell` or `console` in README.md or docs/**/*.md. The line right
before its fence is a marker, an HTML comment that GitHub and MkDocs both render as nothing:

    <!-- runnable -->                                  tests/local/test_doc_examples.py runs it as written
    <!-- not run: needs a Kubernetes cluster -->       the reason it cannot run here, in a few words

A reason that names a test (`tests/x/test_y.py::test_z`) says the same commands already run there; the docs tests
check that the test exists. docs/benchmarks.md is generated: docsgen/benchmarks.py writes its markers."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNNABLE = "<!-- runnable -->"
NOT_RUN = re.compile(r"^<!-- not run: (?P<reason>\S.*?) -->$")
SHELL = ("bash", "sh", "shell", "console")
RUNS_AS_WRITTEN = ("bash", "sh")  # a console block is a transcript (prompts and output): it is never run as is
FENCE = re.compile(r"^\s*(?P<ticks>`{3,})(?P<lang>[\w+-]*)")
NAMED_TEST = re.compile(r"(tests/[\w/]+\.py)(?:::(\w+))?")


@dataclass(frozen=True)
class ShellBlock:
    """One shell block: where it opens, its language, its text, and its marker's verdict."""

    page: str  # relative to the repository root
    line: int  # of the opening fence, 1-based
    lang: str
    script: str
    runnable: bool = False
    reason: str = ""  # why it is not run; "" when runnable or unmarked

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def marked(self) -> bool:
        return self.runnable or bool(self.reason)


def doc_pages(root: Path = ROOT) -> list[Path]:
    """README.md and every page under docs/ (the generated reference pages are not kept in the checkout)."""
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def _marker(line: str) -> tuple[bool, str] | None:
    """(runnable, reason) of a marker line, None for any other line."""
    text = line.strip()
    if text == RUNNABLE:
        return True, ""
    found = NOT_RUN.match(text)
    return (False, found["reason"]) if found else None


def _close(lines: list[str], start: int, ticks: str) -> int | None:
    """The index of the line closing the fence opened at `start` with `ticks`, None if it never closes."""
    for index in range(start + 1, len(lines)):
        found = FENCE.match(lines[index])
        if found and found["ticks"].startswith(ticks) and not lines[index].strip()[len(found["ticks"]) :]:
            return index
    return None


def shell_blocks(path: Path, page: str = "") -> list[ShellBlock]:
    """Every shell block of one page with its marker. A marker not followed at once by a shell fence, `runnable` on
    a console transcript, or an unclosed fence is an error naming the line. Fences nested in a longer fence (an
    example of a marker in a Markdown block) are text, not blocks."""
    page = page or path.relative_to(ROOT).as_posix()
    lines = path.read_text().splitlines()
    blocks: list[ShellBlock] = []
    index = 0
    while index < len(lines):
        marker = _marker(lines[index])
        fence = FENCE.match(lines[index])
        if marker is not None:
            opened = FENCE.match(lines[index + 1]) if index + 1 < len(lines) else None
            if opened is None or opened["lang"] not in SHELL:
                raise ValueError(f"{page}:{index + 1}: a marker must be followed at once by a shell fence")
            if marker[0] and opened["lang"] not in RUNS_AS_WRITTEN:
                raise ValueError(f"{page}:{index + 2}: a {opened['lang']} block is a transcript: not runnable")
        if fence is None:
            index += 1
            continue
        end = _close(lines, index, fence["ticks"])
        if end is None:
            raise ValueError(f"{page}:{index + 1}: the block is never closed")
        if fence["lang"] in SHELL:
            runnable, reason = (_marker(lines[index - 1]) if index else None) or (False, "")
            blocks.append(
                ShellBlock(page, index + 1, fence["lang"], "\n".join(lines[index + 1 : end]) + "\n", runnable, reason)
            )
        index = end + 1
    return blocks


def all_shell_blocks(root: Path = ROOT) -> list[ShellBlock]:
    return [block for path in doc_pages(root) for block in shell_blocks(path, path.relative_to(root).as_posix())]


def runnable_blocks(root: Path = ROOT) -> list[ShellBlock]:
    """The blocks the tests run as written."""
    return [block for block in all_shell_blocks(root) if block.runnable]


def named_tests(reason: str) -> list[tuple[str, str]]:
    """The tests a reason names, as (file, function or "")."""
    return [(found[1], found[2] or "") for found in NAMED_TEST.finditer(reason)]
