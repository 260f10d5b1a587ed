"""The code map and the diagrams, generated at build time: every module is on the map with its docstring's first
sentence, grouped by the layers pyproject.toml's contracts order; each backend's diagram draws the objects that
backend makes, deterministically, is shown on its page, and no box spills out of the box that holds it."""

from __future__ import annotations

import html
from pathlib import Path

import pytest

from docsgen import code_map, diagram_specs, diagrams

ROOT = Path(__file__).resolve().parents[2]


def test_every_module_is_on_the_code_map_with_its_size_and_summary() -> None:
    page = code_map.code_map_page()
    for package in code_map.PACKAGES:
        for module in code_map.modules(package):
            assert f"| `{module.path}` | {module.lines} |" in page, module.path
    assert "## Import contracts" in page and "the bottom layer (common) imports none of our packages" in page


def test_the_map_groups_by_the_contracts_layers_bottom_first() -> None:
    names = [name for name, _ in code_map.groups("miniclusters")]
    assert names.index("miniclusters.api") < names.index("miniclusters.render") < names.index("miniclusters.backends")
    assert names.index("miniclusters.backends") < names.index("miniclusters.operator") < names.index("miniclusters.cli")
    elasticity = [name for name, _ in code_map.groups("elasticity")]
    assert elasticity[:3] == ["elasticity.model", "elasticity.policy", "elasticity.control"]


def test_a_summary_is_the_first_sentence_of_the_docstring() -> None:
    assert code_map.summary('"""One job. Then more.\n\nDetail."""\n') == "One job."
    assert code_map.summary('"""No full stop here\nbut two lines\n\nDetail."""') == "No full stop here but two lines"
    assert code_map.summary("x = 1\n") == ""


def test_a_contract_reads_as_a_rule(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[[tool.importlinter.contracts]]\nname = "n"\ntype = "forbidden"\nsource_modules = ["a"]\n'
        'forbidden_modules = ["b", "c"]\n'
    )
    assert code_map.contracts(tmp_path) == [code_map.Contract("n", "forbidden", "`a` may not import `b`, `c`")]


BACKEND_OBJECTS = {
    "minicluster-local": ["network namespace mc-hello-0", "hostname hello-0", "cgroup miniclusters/hello/0"],
    "minicluster-podman": ["pod hello-0", "broker volume (read-only)", "network minicluster-hello", "rendered objects"],
    "minicluster-kubernetes": [
        "Indexed Job hello",
        "headless Service hello",
        "ConfigMap hello-flux-config",
        "Secret hello-curve-cert",
        "init container",
        "operator Deployment",
    ],
}
PAGES = {"minicluster-local": "local.md", "minicluster-podman": "podman.md", "minicluster-kubernetes": "kubernetes.md"}


@pytest.mark.parametrize("diagram", diagram_specs.all_diagrams(), ids=lambda d: d.name)
def test_a_diagram_is_text_in_an_svg_the_same_on_every_build(diagram: diagrams.Diagram) -> None:
    svg = diagrams.render_svg(diagram)
    assert svg == diagrams.render_svg(diagram), "a rebuild must give the same file"
    text = html.unescape(svg.decode())
    assert "<svg" in text and 'href="http' not in text, "nothing fetched at view time"
    for title in BACKEND_OBJECTS.get(diagram.name, []):
        assert f">{title}<" in text, title


@pytest.mark.parametrize("name", sorted(PAGES))
def test_each_backend_page_shows_its_diagram(name: str) -> None:
    assert f"(diagrams/{name}.svg)" in (ROOT / "docs" / PAGES[name]).read_text()
    assert f"(diagrams/{name}.svg)" in (ROOT / "docs" / "development.md").read_text()


def _inside(child: diagrams.Box, parent: diagrams.Box) -> bool:
    eps = 1e-6
    return (
        child.x >= parent.x - eps
        and child.y >= parent.y - eps
        and child.x + child.w <= parent.x + parent.w + eps
        and child.y + child.h <= parent.y + parent.h + eps
    )


@pytest.mark.parametrize("diagram", diagram_specs.all_diagrams(), ids=lambda d: d.name)
def test_no_box_spills_out_of_its_parent_or_overlaps_a_sibling(diagram: diagrams.Diagram) -> None:
    diagrams.render_svg(diagram)  # lays it out
    for box in diagrams._walk(diagram.root):
        children = [child for row in box.rows for child in row]
        for child in children:
            assert _inside(child, box), (child.title, box.title)
        for a in children:
            for b in children:
                if a is not b:
                    apart = a.x + a.w <= b.x + 1e-6 or b.x + b.w <= a.x + 1e-6
                    apart = apart or a.y + a.h <= b.y + 1e-6 or b.y + b.h <= a.y + 1e-6
                    assert apart, (a.title, b.title)
