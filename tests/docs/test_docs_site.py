"""The README stays a front door whose links and figures hold; the generated reference pages cover every command
and endpoint; docs/benchmarks.md matches bench/results.toml. (`make docs` builds the whole site strictly.)"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import click
import yaml

from docsgen import benchmarks, cli_reference, rest_reference
from docsgen.markdown_cells import cell
from miniclusters.cli import main

ROOT = Path(__file__).resolve().parents[2]
markdown = importlib.import_module("markdown")  # the Markdown mkdocs renders with (no type stubs installed)
README = (ROOT / "README.md").read_text()


def test_the_readme_is_a_front_door() -> None:
    assert len(README.splitlines()) < 250
    assert "make demo" in README and "make test" in README


def test_every_relative_link_in_the_readme_names_a_file_that_exists() -> None:
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README)
    local = [t for t in targets if "://" not in t]
    assert local, "the README links to the docs"
    missing = [t for t in local if not (ROOT / t).exists()]
    assert not missing, f"README links to missing files: {missing}"


def test_the_readme_headline_figures_are_the_recorded_ones() -> None:
    """Each headline in bench/results.toml is quoted as is, and every figure line the README lists is one of them."""
    headlines = {bench.headline for bench in benchmarks.load() if bench.headline}
    assert headlines
    section = README[README.index("## Headline figures") :]
    section = section[: section.index("\n## ", 1)]
    listed = {line[2:] for line in section.splitlines() if line.startswith("- ")}
    assert listed == headlines


def test_the_benchmarks_page_is_generated_from_the_recorded_runs() -> None:
    assert benchmarks.main(["--check"]) == 0
    page = benchmarks.PAGE.read_text()
    for bench in benchmarks.load():
        assert f"## {bench.title}" in page
        for table in bench.tables:
            for row in table.rows:
                assert "| " + " | ".join(row) + " |" in page


def test_a_ragged_table_is_refused_naming_the_bench(tmp_path: Path) -> None:
    path = tmp_path / "results.toml"
    path.write_text(
        '[[bench]]\nid = "x"\ntitle = "t"\nscript = "s"\ncommand = "c"\nconditions = "q"\nsummary = "m"\n'
        '[[bench.table]]\ncolumns = ["a", "b"]\nrows = [["1"]]\n'
    )
    try:
        benchmarks.load(path)
    except ValueError as exc:
        assert "bench 'x'" in str(exc) and "row 0" in str(exc)
    else:
        raise AssertionError("a row with too few cells was accepted")


def _commands(group: click.Group, path: str) -> list[str]:
    found = []
    for name in group.list_commands(click.Context(group)):
        command = group.get_command(click.Context(group), name)
        assert command is not None, name
        if command.hidden:
            continue
        found.append(f"{path} {name}")
        if isinstance(command, click.Group):
            found += _commands(command, f"{path} {name}")
    return found


def test_the_cli_reference_has_every_command_with_its_options() -> None:
    page = cli_reference.minicluster_page()
    for command in _commands(main, "minicluster"):
        assert f"`{command}`\n" in page, command
    assert "| <code>--restore ARCHIVE</code> | Restore the queue" in page  # options come with metavars and help
    # a choice's pipe shows as a pipe (in a Markdown code span its escape `\|` was printed as it is)
    assert "<code>--policy [easy&#124;fcfs]</code>" in page and "[easy\\|fcfs]" not in page
    flux = cli_reference.flux_page()
    for name in ("submit", "jobs", "resource", "resource list", "start", "restful users"):
        assert f"## `flux {name}`" in flux or f"### `flux {name}`" in flux, name
    assert "Usage: flux submit" in flux


def test_the_rest_reference_has_every_path_of_the_openapi_document() -> None:
    document = rest_reference.openapi_document()
    page = rest_reference.rest_page(document)
    for path, item in document["paths"].items():
        for method in item:
            assert f"### `{method.upper()} {path}`" in page
    for name in document["components"]["schemas"]:
        assert f"### {name} {{#" in page


def test_a_recorded_run_replaces_the_result_line_and_regenerates_the_page(tmp_path: Path) -> None:
    results = tmp_path / "results.toml"
    page = tmp_path / "benchmarks.md"
    results.write_text(benchmarks.RESULTS.read_text())
    benchmarks.record_result("multiplex", {"theta2": 1.7, "note": "it's"}, results, page)
    benchmarks.record_result("jobs", {"jobs_per_s": 600}, results, page)  # an entry without a result yet
    recorded = {bench.id: bench.result for bench in benchmarks.load(results)}
    assert recorded["multiplex"] == '{"theta2": 1.7, "note": "it\'s"}'
    assert recorded["jobs"] == '{"jobs_per_s": 600}'
    assert '{"jobs_per_s": 600}' in page.read_text()
    assert results.read_text().startswith("# Recorded benchmark runs")  # comments kept
    try:
        benchmarks.record_result("nonesuch", {}, results, None)
    except ValueError as exc:
        assert "nonesuch" in str(exc)
    else:
        raise AssertionError("an unknown bench was recorded")


def test_every_page_of_docs_is_in_the_navigation() -> None:
    """A page left out of mkdocs.yml's nav is reachable only by a link, if any (rest-performance.md was)."""
    root = Path(__file__).resolve().parents[2]
    listed = set(re.findall(r":\s*([\w./-]+\.md)\s*$", (root / "mkdocs.yml").read_text(), flags=re.M))
    pages = {p.relative_to(root / "docs").as_posix() for p in (root / "docs").rglob("*.md")}
    assert pages - listed == set()


def test_a_pipe_in_a_table_cell_shows_as_a_pipe_in_code_and_out() -> None:
    """Outside code a pipe is escaped (else it splits the cell); inside a code span it stays bare (an escape there
    was printed as `\\|`)."""
    assert cell("one of `a|b` or c|d") == "one of `a|b` or c\\|d"
    html = markdown.markdown(f"| x |\n|---|\n| {cell('one of `a|b` or c|d')} |\n", extensions=["tables"])
    assert "<code>a|b</code> or c|d</td>" in html


def test_no_generated_reference_page_shows_an_escaped_pipe() -> None:
    pages = cli_reference.minicluster_page() + cli_reference.flux_page() + rest_reference.rest_page()
    html = markdown.markdown(pages, extensions=["tables", "attr_list", "pymdownx.superfences"])
    assert "\\|" not in html


def test_the_home_page_table_names_every_capability_page() -> None:
    """Every page of the nav's sections (Running clusters, REST and web, Elasticity) is a row of the home page's
    capability table; the real Kubernetes cluster has its own row."""
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]
    sections = [entry for entry in nav if isinstance(next(iter(entry.values())), list)]
    pages = {page for section in sections if "Reference" not in section for page in _nav_pages(section)}
    home = (ROOT / "docs" / "index.md").read_text()
    table = home[home.index("## What it does") :]
    linked = set(re.findall(r"\]\(([\w-]+\.md)(?:#[\w-]*)?\)", table))
    assert pages - linked == set()
    assert "(kubernetes.md#a-real-cluster-on-this-machine)" in table


def _nav_pages(entry: object) -> list[str]:
    if isinstance(entry, str):
        return [entry]
    if isinstance(entry, dict):
        return [page for value in entry.values() for page in _nav_pages(value)]
    if isinstance(entry, list):
        return [page for item in entry for page in _nav_pages(item)]
    return []


def _prose_lines(text: str) -> set[str]:
    """A page's lines outside code fences and HTML comments, whitespace folded, long enough to be a text."""
    lines, fenced = set(), False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        folded = " ".join(line.split())
        if not fenced and len(folded) > 30 and not folded.startswith("<!--"):
            lines.add(folded)
    return lines


def test_no_text_of_the_readme_is_copied_into_the_docs() -> None:
    """Each text lives in one place: the README links to the pages instead of repeating them (43 of its lines were
    copies of getting-started.md, index.md and development.md). Commands in shell blocks may repeat."""
    readme = _prose_lines(README)
    copied = {
        page.name: sorted(readme & _prose_lines(page.read_text())) for page in sorted((ROOT / "docs").glob("*.md"))
    }
    assert {page: lines for page, lines in copied.items() if lines} == {}
