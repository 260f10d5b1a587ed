"""The code map page (reference/code-map.md), generated from the checkout when the site is built.

Modules move while the code is restructured, so the map is read from the files themselves: one row per package
and module with the first sentence of its docstring and its size in lines, grouped by layer as pyproject.toml's
import contracts order them (bottom first), and the contracts themselves by name."""

from __future__ import annotations

import ast
import inspect
import io
import tokenize
import tomllib
from dataclasses import dataclass
from pathlib import Path

from docsgen.markdown_cells import cell

ROOT = Path(__file__).resolve().parents[1]
#: Our packages from the bottom up: `common` imports none of the others, the decision layer neither the broker
#: nor the product, the broker never the product; the burst service sits beside the product it is wired into.
PACKAGES = ("common", "elasticity", "broker", "bursting", "miniclusters", "docsgen")
SUMMARY_CHARS = 220


@dataclass(frozen=True)
class Module:
    name: str  # dotted, a package by its own name
    path: str  # relative to the root
    lines: int
    summary: str


@dataclass(frozen=True)
class Contract:
    name: str
    kind: str
    what: str


def docstring(source: str) -> str:
    """A module's docstring, reading only as far as its first statement (parsing every module took seconds)."""
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.ENCODING):
            continue
        if token.type == tokenize.STRING:
            value = ast.literal_eval(token.string)
            return inspect.cleandoc(value) if isinstance(value, str) else ""
        return ""
    return ""


def summary(source: str) -> str:
    """The first sentence of a module's docstring (its first paragraph, if no sentence ends there)."""
    doc = docstring(source)
    paragraph = " ".join(doc.strip().split("\n\n", 1)[0].split())
    for end in (". ", ".\n"):
        if end in paragraph + "\n":
            paragraph = (paragraph + "\n").split(end, 1)[0] + "."
            break
    return paragraph if len(paragraph) <= SUMMARY_CHARS else paragraph[: SUMMARY_CHARS - 1].rstrip() + "…"


def modules(package: str, root: Path = ROOT) -> list[Module]:
    """Every module of a package, packages by their `__init__.py`, in path order."""
    found = []
    for path in sorted((root / package).rglob("*.py")):
        relative = path.relative_to(root)
        parts = list(relative.with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        text = path.read_text()
        found.append(Module(".".join(parts), relative.as_posix(), len(text.splitlines()), summary(text)))
    return found


def _contract_entries(root: Path) -> list[dict[str, object]]:
    """`[[tool.importlinter.contracts]]` as written (open: import-linter's own keys, per contract type)."""
    with (root / "pyproject.toml").open("rb") as handle:
        raw = tomllib.load(handle).get("tool", {}).get("importlinter", {}).get("contracts", [])
    return [entry for entry in raw if isinstance(entry, dict)] if isinstance(raw, list) else []


def _names(value: object) -> list[str]:
    return [str(item) for item in value] if isinstance(value, list) else []


def contracts(root: Path = ROOT) -> list[Contract]:
    """The import contracts `make lint` checks, each in a line."""
    out = []
    for entry in _contract_entries(root):
        kind = str(entry.get("type", ""))
        if kind == "layers":
            what = " > ".join(f"`{layer}`" for layer in _names(entry.get("layers")))
        elif kind == "forbidden":
            sources = ", ".join(f"`{name}`" for name in _names(entry.get("source_modules")))
            forbidden = ", ".join(f"`{name}`" for name in _names(entry.get("forbidden_modules")))
            what = f"{sources} may not import {forbidden}"
        elif kind == "independence":
            what = "none of " + ", ".join(f"`{name}`" for name in _names(entry.get("modules"))) + " imports another"
        else:
            what = "in " + ", ".join(f"`{name}`" for name in _names(entry.get("ancestors")))
        out.append(Contract(str(entry.get("name", "")), kind, what))
    return out


def layer_order(root: Path = ROOT) -> list[str]:
    """The subpackages the `layers` contracts name, bottom first (`a | b` counts as both)."""
    order: list[str] = []
    for contract in _contract_entries(root):
        if contract.get("type") == "layers":
            for layer in reversed(_names(contract.get("layers"))):
                order += [part.strip() for part in layer.split("|")]
    return order


def groups(package: str, root: Path = ROOT) -> list[tuple[str, list[Module]]]:
    """A package's modules by group: the layers its contracts order (bottom first), then its other subpackages,
    then its own top-level modules."""
    members = modules(package, root)
    layered = [name for name in layer_order(root) if name.startswith(package + ".")]

    def group_of(module: Module) -> str:
        for name in layered:
            if module.name == name or module.name.startswith(name + "."):
                return name
        parts = module.name.split(".")
        is_package = module.path.endswith("__init__.py")
        return ".".join(parts[:2]) if len(parts) > 2 or (len(parts) == 2 and is_package) else package

    by_group: dict[str, list[Module]] = {}
    for module in members:
        by_group.setdefault(group_of(module), []).append(module)
    others = sorted(name for name in by_group if name not in layered and name != package)
    order = [name for name in layered if name in by_group] + others + [package]
    return [(name, by_group[name]) for name in order if name in by_group]


def _table(members: list[Module]) -> list[str]:
    lines = ["| module | lines | what it is |", "|---|--:|---|"]
    lines += [f"| `{m.path}` | {m.lines} | {cell(m.summary)} |" for m in members]
    return [*lines, ""]


def code_map_page(root: Path = ROOT) -> str:
    parts = [
        "# Code map\n",
        "Generated from the checkout when the site is built: every package and module with the first sentence of "
        "its docstring and its size in lines, grouped by layer, bottom first, as the import contracts below order "
        "them. How the parts work together: [Development](../development.md).\n",
        "## Import contracts\n",
        "`make lint` checks these with import-linter (`[tool.importlinter]` in `pyproject.toml`).\n",
        "| contract | kind | rule |",
        "|---|---|---|",
    ]
    parts += [f"| {cell(c.name)} | {c.kind} | {cell(c.what)} |" for c in contracts(root)]
    parts.append("")
    for package in PACKAGES:
        members = groups(package, root)
        total = sum(m.lines for _, group in members for m in group)
        count = sum(len(group) for _, group in members)
        parts.append(f"## `{package}`\n")
        parts.append(f"{count} modules, {total:,} lines.\n")
        for name, group in members:
            title = "top-level modules" if name == package else f"`{name}`"
            parts.append(f"### {package}: {title}\n" if name == package else f"### {title}\n")
            parts += _table(group)
    return "\n".join(parts)
