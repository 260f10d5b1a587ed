"""MkDocs hooks (mkdocs.yml `hooks:`): the generated pages, built fresh on every `mkdocs build`.

reference/cli.md and reference/flux.md come from the commands, reference/rest-api.md from the REST app's OpenAPI
document, reference/code-map.md from the modules and pyproject.toml's import contracts, diagrams/*.svg from
docsgen/diagram_specs.py; none of them is kept in the checkout, so they cannot go stale. docs/benchmarks.md is kept
(it reads on GitHub too) and must match bench/results.toml: a stale one fails the build."""

from __future__ import annotations

import sys
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # mkdocs loads this file by path; its siblings import as `docsgen.*`

from docsgen import benchmarks, cli_reference, code_map, diagram_specs, diagrams, rest_reference  # noqa: E402


def on_files(files: Files, config: MkDocsConfig) -> Files:
    generated = {
        "reference/cli.md": cli_reference.minicluster_page,
        "reference/flux.md": cli_reference.flux_page,
        "reference/rest-api.md": rest_reference.rest_page,
        "reference/code-map.md": code_map.code_map_page,
    }
    for uri, build in generated.items():
        files.append(File.generated(config, uri, content=build()))
    for diagram in diagram_specs.all_diagrams():
        files.append(File.generated(config, f"diagrams/{diagram.name}.svg", content=diagrams.render_svg(diagram)))
    page = benchmarks.render(benchmarks.load())
    if benchmarks.PAGE.read_text() != page:
        raise PluginError(
            "docs/benchmarks.md is stale (bench/results.toml changed): run .venv/bin/python -m docsgen.benchmarks"
        )
    return files
