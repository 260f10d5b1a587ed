"""Who changes which attribute, read from the source: the ownership tests of the broker's parts, the job manager
and the local backend scan their packages with it (one owner per piece of state, DESIGN.md).

A write is an assignment, augmented assignment, deletion or item assignment, or a call of a mutating method
(`append`, `pop`, `update`, ...; a scan may name more, as the job manager's names DrainTable's `apply`) on an
attribute, inside a method of a class or, when asked, a module-level function (and the closures in it: the class
is then "<module>"). Standard library only.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

MUTATORS = {"append", "extend", "add", "discard", "pop", "popitem", "clear", "update", "setdefault", "remove", "insert"}


@dataclass(frozen=True)
class Write:
    module: str
    cls: str
    method: str
    root: str  # "self" or the name of another object
    attr: str  # the first attribute under root that the write changes
    line: int
    by_call: bool = False  # a mutating method's call (x.pop(...)) rather than an assignment


def _root(node: ast.expr) -> tuple[str, str] | None:
    """(root name, first attribute) of an expression like root.attr[...].more, or None if it is not one."""
    first = None
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        if isinstance(node, ast.Attribute):
            first = node.attr
        node = node.value
    if isinstance(node, ast.Name) and first is not None:
        return node.id, first
    return None


def _targets(node: ast.AST, mutators: frozenset[str] | set[str] = MUTATORS) -> list[ast.expr]:
    if isinstance(node, ast.Assign):
        found = list(node.targets)
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        found = [node.target]
    elif isinstance(node, ast.Delete):
        found = list(node.targets)
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in mutators:
        found = [node.func.value]
    else:
        return []
    flat: list[ast.expr] = []
    while found:
        target = found.pop()
        if isinstance(target, (ast.Tuple, ast.List)):
            found.extend(target.elts)
        elif isinstance(target, (ast.Attribute, ast.Subscript)):
            flat.append(target)
    return flat


def writes(
    source: str, module: str, mutators: frozenset[str] | set[str] = MUTATORS, functions: bool = False
) -> list[Write]:
    """Every write to an attribute (of self or of another object) inside the classes of a module, and inside its
    module-level functions too with `functions` (a closure registered as a handler writes as much as a method)."""
    tree = ast.parse(source)
    scopes: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]] = []
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        scopes += [(cls.name, n) for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if functions:
        scopes += [("<module>", n) for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    found = []
    for owner, method in scopes:
        for node in ast.walk(method):
            for target in _targets(node, mutators):
                root = _root(target)
                if root is not None:
                    line = getattr(node, "lineno", 0)
                    found.append(Write(module, owner, method.name, *root, line, isinstance(node, ast.Call)))
    return found


def foreign_private_reads(source: str) -> list[str]:
    """`x._name` where x is not self: one part reaching into another's state."""
    return [
        f"line {n.lineno}: {ast.unparse(n)}"
        for n in ast.walk(ast.parse(source))
        if isinstance(n, ast.Attribute)
        and n.attr.startswith("_")
        and not n.attr.startswith("__")
        and not (isinstance(n.value, ast.Name) and n.value.id == "self")
    ]
