"""Which installed distributions go into the broker bundle's core and which into its extras (build time only).

The core is what the init container copies into every pod: the interpreter, the standard library and what the
broker, the `flux` CLI, the REST server and the burst service import. The extras are the plotting stack, numpy
and the Kubernetes client with everything only they require (about 100 MB that those processes never load):
they stay in the image under env/extras, where the operator and `minicluster` find them, and are copied into a
pod only when its spec needs them (`install.sh DEST --with-extras`, rendered for campaigns and bursting).
miniclusters.spec (the frozen core) and extras.py (the extras' files) both read the split from here.
"""

from __future__ import annotations

from collections.abc import Iterable
from importlib.metadata import PackageNotFoundError, packages_distributions, requires

EXTRA_ROOTS = frozenset({"numpy", "matplotlib", "kubernetes"})
"""Requirements of pyproject.toml left out of the core, with whatever only they need."""


def normalized(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def requirement_names(lines: Iterable[str]) -> list[str]:
    """Distribution names of requirement lines (`pydantic>=2.6` -> pydantic)."""
    names = []
    for line in lines:
        line = line.split(";")[0].split("#")[0].strip()
        for stop in "<>=!~[ (":
            line = line.split(stop)[0]
        if line:
            names.append(normalized(line))
    return names


def closure(names: Iterable[str]) -> set[str]:
    """These distributions and everything they require, installed here (extras' requirements are left out)."""
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requirements = requires(name) or []
        except PackageNotFoundError:
            continue
        todo += [requirement_names([r])[0] for r in requirements if "extra ==" not in r]
    return seen


def split(requirement_lines: Iterable[str]) -> tuple[set[str], set[str]]:
    """(core, extras): distribution names of the closure of the requirements, the extras' own part apart."""
    roots = requirement_names(requirement_lines)
    core = closure(name for name in roots if name not in EXTRA_ROOTS)
    extras = closure(name for name in roots if name in EXTRA_ROOTS) - core
    return core, extras


def top_level_names(distributions: set[str]) -> list[str]:
    """The importable top-level names these distributions install."""
    return sorted(
        top
        for top, dists in packages_distributions().items()
        if {normalized(d) for d in dists} & distributions and not top.startswith("__")
    )
