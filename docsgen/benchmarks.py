"""docs/benchmarks.md from bench/results.toml: the recorded runs as tables, notes and figures.

.venv/bin/python -m docsgen.benchmarks            # rewrite docs/benchmarks.md
.venv/bin/python -m docsgen.benchmarks --check    # exit 1 when it is stale (the docs build checks this too)
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NotRequired, TypedDict

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results.toml"
PAGE = ROOT / "docs" / "benchmarks.md"
#: The marker before each bench's command (docsgen/shell_blocks.py): the docs tests do not run benchmarks.
NOT_RUN = (
    "<!-- not run: a benchmark: its figures mean something only on a quiet machine and most take minutes; "
    "tests/bench/test_bench_scripts.py starts every script -->"
)


@dataclass(frozen=True)
class Table:
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    caption: str = ""


@dataclass(frozen=True)
class Bench:
    id: str
    title: str
    script: str
    command: str
    conditions: str
    summary: str
    tables: tuple[Table, ...]
    notes: tuple[str, ...] = ()
    headline: str = ""
    figure: str = ""
    figure_caption: str = ""
    result: str = ""


class RawTable(TypedDict):
    """A `[[bench.table]]` of bench/results.toml: the columns, the rows of cells, and a caption if any."""

    columns: list[str]
    rows: list[list[str]]
    caption: NotRequired[str]


def _table(raw: RawTable, where: str) -> Table:
    columns = tuple(raw["columns"])
    rows = tuple(tuple(row) for row in raw["rows"])
    for number, row in enumerate(rows):
        if len(row) != len(columns):
            raise ValueError(f"{where}: row {number} has {len(row)} cells for {len(columns)} columns")
    return Table(columns=columns, rows=rows, caption=raw.get("caption", ""))


def load(path: Path = RESULTS) -> list[Bench]:
    """The recorded runs; a missing key or a ragged table is an error naming the bench."""
    data = tomllib.loads(path.read_text())
    benches = []
    for raw in data["bench"]:
        where = f"{path.name}: bench {raw.get('id', '?')!r}"
        tables = tuple(_table(t, where) for t in raw.get("table", []))
        fields = {k: v for k, v in raw.items() if k != "table"}
        fields["notes"] = tuple(fields.get("notes", ()))
        try:
            bench = Bench(tables=tables, **fields)
        except TypeError as exc:
            raise ValueError(f"{where}: {exc}") from None
        if bench.result:
            json.loads(bench.result)  # a recorded JSON line must parse
        benches.append(bench)
    return benches


def _render_table(table: Table) -> list[str]:
    lines = [f"*{table.caption}*\n"] if table.caption else []
    lines.append("| " + " | ".join(table.columns) + " |")
    lines.append("|" + "---|" * len(table.columns))
    lines += ["| " + " | ".join(row) + " |" for row in table.rows]
    lines.append("")
    return lines


def render(benches: list[Bench]) -> str:
    lines = [
        "<!-- Generated from bench/results.toml by `python -m docsgen.benchmarks`: edit that file, not this one. -->",
        "# Benchmarks\n",
        "Speed and memory targets live in `bench/`: scripts that print figures (and a JSON line where one is "
        "asked for), not timed tests. These are the recorded runs the rest of the documentation quotes. The "
        "machine is small (2 cores) and shared, so figures move with its load: rerun a script to compare.\n",
    ]
    for bench in benches:
        lines.append(f"## {bench.title}\n")
        lines.append(f"{bench.summary} *{bench.conditions}*\n")
        lines.append(f"{NOT_RUN}\n```bash\n{bench.command}\n```\n")
        for table in bench.tables:
            lines += _render_table(table)
        if bench.result:
            lines.append(f"The JSON line it printed:\n\n```json\n{bench.result}\n```\n")
        if bench.figure:
            lines.append(f"![{bench.figure_caption or bench.title}]({bench.figure})\n")
        lines += [note + "\n" for note in bench.notes]
    return "\n".join(lines).rstrip() + "\n"


# open: each bench's own figures, recorded as the JSON line it printed
def record_result(bench_id: str, figures: dict[str, Any], path: Path = RESULTS, page: Path | None = PAGE) -> None:
    """A bench script's `--record`: its JSON line becomes the entry's `result`, and the page is regenerated.

    Edits the one line in place (the file's comments and layout are kept); the tables and notes stay as they
    were, to be brought up to date by hand from the same run's printed figures."""
    line = json.dumps(figures)
    value = f"result = {json.dumps(line)}"  # a TOML basic string is a JSON string
    lines = path.read_text().splitlines()
    starts = [i for i, text in enumerate(lines) if text.strip() == "[[bench]]"] + [len(lines)]
    for start, end in itertools.pairwise(starts):
        if f'id = "{bench_id}"' not in lines[start:end]:
            continue
        at = next((i for i in range(start, end) if lines[i].startswith("result = ")), None)
        if at is None:
            at = next(i for i in range(start, end) if lines[i].startswith("id = ")) + 1
            lines.insert(at, value)
        else:
            lines[at] = value
        path.write_text("\n".join(lines) + "\n")
        benches = load(path)  # refuses what it cannot read back
        if page is not None:
            page.write_text(render(benches))
        return
    raise ValueError(f"{path.name}: no bench {bench_id!r}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/benchmarks.md is stale")
    args = parser.parse_args(argv)
    page = render(load())
    if args.check:
        if not PAGE.exists() or PAGE.read_text() != page:
            print(f"{PAGE.relative_to(ROOT)} is stale: run .venv/bin/python -m docsgen.benchmarks", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(page)
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
