"""The code's shape in figures: modules over the size signal, open JSON shapes (`dict[str, Any]`), functions over
the complexity limit, and import cycles (type-only and function-local imports included).

`python -m docsgen.code_shape` prints them (and one JSON line); tests/test_code_shape.py holds the limits, so a
regression fails the suite and the figures in docs/development.md stay true.
"""

from __future__ import annotations

import ast
import io
import json
import re
import subprocess
import sys
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("common", "miniclusters", "broker", "elasticity", "bursting", "docsgen")
"""The product: every package the distribution ships, and the docs generator."""

MODULE_LINES_MAX = 450
COMPLEXITY_MAX = 15

OPEN_DICT = re.compile(r"\bdict\s*\[\s*str\s*,\s*Any\s*\]")
"""The shape the issue counts."""
OPEN_OTHER = re.compile(
    r"\b(?:Mapping|MutableMapping|Dict)\s*\[\s*str\s*,\s*(?:Any|object)\s*\]|\bdict\s*\[\s*str\s*,\s*object\s*\]"
)
"""The same openness spelt otherwise: counted apart, so that a rename does not pass for a typed shape."""


@dataclass(frozen=True)
class Offender:
    """A function over the complexity limit: `path:qualified-name` and its McCabe complexity."""

    where: str
    complexity: int


def product_files(root: Path = ROOT) -> Iterator[Path]:
    for package in PACKAGES:
        yield from sorted((root / package).rglob("*.py"))


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def oversized(root: Path = ROOT, limit: int = MODULE_LINES_MAX) -> dict[str, int]:
    """Product modules longer than `limit` lines, with their lengths."""
    sizes = {str(p.relative_to(root)): len(p.read_text(encoding="utf-8").splitlines()) for p in product_files(root)}
    return {path: lines for path, lines in sizes.items() if lines > limit}


def _open_aliases(tree: ast.Module) -> dict[str, bool]:
    """The module-level type aliases of an open shape it defines: name -> whether the shape is `dict[str, Any]`."""
    found: dict[str, bool] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name, value = node.targets[0].id, node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            name, value = node.target.id, node.value
        else:
            continue
        shape = ast.unparse(value)
        if OPEN_DICT.fullmatch(shape) or OPEN_OTHER.fullmatch(shape):
            found[name] = OPEN_DICT.fullmatch(shape) is not None
    return found


def _alias_uses(tree: ast.Module, aliases: set[str]) -> int:
    """How often the given names are used as names in the module (its own definitions and imports excluded)."""
    return sum(
        isinstance(node, ast.Name) and node.id in aliases and isinstance(node.ctx, ast.Load) for node in ast.walk(tree)
    )


def open_shapes(root: Path = ROOT) -> tuple[int, int]:
    """(occurrences of `dict[str, Any]`, occurrences of its other spellings) in product code. A type alias of an open
    shape (`Payload = dict[str, Any]`) counts at each place it is used, in its own module or one importing it."""
    files = list(product_files(root))
    texts = {path: path.read_text(encoding="utf-8") for path in files}
    trees = {path: ast.parse(text) for path, text in texts.items()}
    code = [_code_only(t) for t in texts.values()]
    dicts = sum(len(OPEN_DICT.findall(c)) for c in code)
    others = sum(len(OPEN_OTHER.findall(c)) for c in code)
    defined = {module_name(path, root): _open_aliases(tree) for path, tree in trees.items()}
    for path, tree in trees.items():
        here = module_name(path, root)
        visible = dict(defined.get(here, {}))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                source = _source(here, path, node)
                for alias in node.names:
                    if alias.name in defined.get(source, {}):
                        visible[alias.asname or alias.name] = defined[source][alias.name]
        dicts += _alias_uses(tree, {name for name, is_dict in visible.items() if is_dict})
        others += _alias_uses(tree, {name for name, is_dict in visible.items() if not is_dict})
    return dicts, others


def _code_only(text: str) -> str:
    """The module's code without its comments and strings (docstrings included): a shape named in prose is not one."""
    kept = [
        token.string
        for token in tokenize.generate_tokens(io.StringIO(text).readline)
        if token.type not in (tokenize.COMMENT, tokenize.STRING)
    ]
    return " ".join(kept)


def _source(name: str, path: Path, node: ast.ImportFrom) -> str:
    """The absolute module a `from ... import` reads from."""
    if not node.level:
        return node.module or ""
    base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The modules of ours that `name` imports anywhere in its text (module level, functions, TYPE_CHECKING)."""
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names if alias.name in known)
        elif isinstance(node, ast.ImportFrom):
            source = _source(name, path, node)
            for alias in node.names:
                full = f"{source}.{alias.name}"
                if full in known:
                    targets.add(full)
                elif source in known:
                    targets.add(source)
    targets.discard(name)
    return targets


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    paths = {module_name(p, root): p for p in product_files(root)}
    known = set(paths)
    return {name: _imports(name, path, known) for name, path in paths.items()}


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)

    for start in sorted(graph):
        if start in index:
            continue
        visit(start)
        work = [(start, iter(sorted(graph[start])))]
        while work:
            node, children = work[-1]
            child = next((c for c in children if c not in index or c in on_stack), None)
            if child is not None:
                if child in index:
                    low[node] = min(low[node], index[child])
                else:
                    visit(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while not component or component[-1] != node:
                    component.append(stack.pop())
                    on_stack.discard(component[-1])
                if len(component) > 1:
                    found.append(sorted(component))
    return found


_C901 = re.compile(r"`(?P<name>[^`]+)` is too complex \((?P<complexity>\d+) > \d+\)")


def complex_functions(root: Path = ROOT, limit: int = COMPLEXITY_MAX) -> list[Offender]:
    """Functions over `limit` by ruff's McCabe rule (C901), sorted by place."""
    ran = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--select", "C901", "--ignore-noqa", "--output-format", "json",
         "--no-cache", "--config", f"lint.mccabe.max-complexity={limit}", *PACKAGES],
        cwd=root, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    offenders = []
    for item in json.loads(ran.stdout or "[]"):
        match = _C901.search(item["message"])
        if match:
            where = f"{Path(item['filename']).resolve().relative_to(root.resolve())}:{match['name']}"
            offenders.append(Offender(where, int(match["complexity"])))
    return sorted(offenders, key=lambda o: o.where)


def main() -> int:
    big = oversized()
    dicts, others = open_shapes()
    cycles = import_cycles(import_graph())
    offenders = complex_functions()
    for path, lines in sorted(big.items()):
        print(f"module over {MODULE_LINES_MAX} lines: {path} ({lines})")
    for offender in offenders:
        print(f"complexity {offender.complexity} > {COMPLEXITY_MAX}: {offender.where}")
    for cycle in cycles:
        print("import cycle: " + " -> ".join(cycle))
    print(f"dict[str, Any] in product code: {dicts} (other open spellings: {others})")
    figures = {
        "modules_over_limit": len(big),
        "functions_over_complexity": len(offenders),
        "import_cycles": len(cycles),
        "dict_str_any": dicts,
        "open_other": others,
    }
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
