"""Loading a MiniCluster from YAML or a mapping, with every problem reported by field path."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from miniclusters.api.errors import Problem, SpecError, join_path
from miniclusters.api.names import dns1123_label_error
from miniclusters.api.rules import check_minicluster
from miniclusters.api.spec import MiniCluster

MAX_PRUNE_ROUNDS = 4


def _message(error: ErrorDetails) -> str:
    kind = error["type"]
    if kind == "extra_forbidden":
        return "unknown field"
    if kind == "missing":
        return "required field is missing"
    message = error["msg"]
    if message.startswith("Value error, "):
        message = message[len("Value error, ") :]
    if kind not in ("value_error", "assertion_error") and "input" in error:
        shown = repr(error["input"])
        if len(shown) <= 60:
            message += f" (got {shown})"
    return message


def _problems_of(errors: list[ErrorDetails]) -> list[Problem]:
    return [Problem(join_path(*error["loc"]), _message(error)) for error in errors]


def _prune(data: Any, loc: tuple[str | int, ...]) -> bool:
    """Drop the offending key so the rest can still be checked; False when that is not possible."""
    if not loc or not isinstance(loc[-1], str):
        return False
    node = data
    for part in loc[:-1]:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return False
    if isinstance(node, dict) and loc[-1] in node:
        del node[loc[-1]]
        return True
    return False


def _holds(node: Any, part: str | int) -> bool:
    """`node[part]` is there: a dict's key or a list's index."""
    if isinstance(node, dict):
        return part in node
    return isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)


def _remove_refused(candidate: MiniCluster, locs: set[tuple[str | int, ...]]) -> list[tuple[object, str]]:
    """Take the fields set aside out of `candidate` (they hold their defaults there), so a rule reading one fails
    instead of judging a value nobody wrote; returns the (model, field) pairs removed."""
    removed: list[tuple[object, str]] = []
    for loc in locs:
        node: Any = candidate
        for depth, part in enumerate(loc, 1):
            if isinstance(node, BaseModel) and isinstance(part, str):
                field = next((n for n, info in type(node).model_fields.items() if part in (n, info.alias)), None)
                if field is None:  # an unknown key: nothing stands in for it
                    break
                if depth == len(loc):
                    if field in node.__dict__:
                        del node.__dict__[field]
                        removed.append((node, field))
                    break
                node = getattr(node, field)
            elif _holds(node, part):
                node = node[part]
            else:
                break
    return removed


# open: the user's document before validation
def _name_problems(data: Mapping[str, Any], reported: set[str]) -> list[Problem]:
    """metadata.name/namespace checked on the raw mapping, so they come in the same report as type errors."""
    metadata = data.get("metadata")
    if not isinstance(metadata, Mapping):
        return []
    found = []
    for key in ("name", "namespace"):
        value = metadata.get(key)
        path = f"metadata.{key}"
        if isinstance(value, str) and path not in reported:
            error = dns1123_label_error(value)
            if error:
                found.append(Problem(path, error))
    return found


def load_minicluster(data: Any, source: str | None = None) -> MiniCluster:
    """Validate a mapping into a MiniCluster or raise SpecError listing every problem.

    Type errors and cross-field rule violations are reported together: fields that fail their type
    check are set aside and the rest is checked again, so one bad field does not hide other mistakes.
    """
    if not isinstance(data, Mapping):
        raise SpecError([Problem("", f"expected a MiniCluster mapping, got {type(data).__name__}")], source)
    problems: list[Problem] = []
    set_aside: set[tuple[str | int, ...]] = set()
    attempt: Any = copy.deepcopy(dict(data))
    ruled = False
    for _ in range(MAX_PRUNE_ROUNDS):
        try:
            candidate = MiniCluster.model_validate(attempt)
        except ValidationError as exc:
            # A field we set aside ourselves now shows as missing: that is not a new problem.
            errors = [e for e in exc.errors() if not (e["type"] == "missing" and tuple(e["loc"]) in set_aside)]
            problems += _problems_of(errors)
            locs = [tuple(error["loc"]) for error in errors]
            if not errors or not all(_prune(attempt, loc) for loc in locs):
                break
            set_aside.update(locs)
            continue
        problems += check_minicluster(candidate, _remove_refused(candidate, set_aside))
        ruled = True
        break
    if not ruled:  # the cross-field rules could not run: still check the names, which need nothing else
        problems += _name_problems(data, {problem.path for problem in problems})
    if problems:
        raise SpecError(problems, source)
    return MiniCluster.model_validate(dict(data))


def parse_yaml_documents(text: str, source: str) -> list[Any]:
    try:
        return [doc for doc in yaml.safe_load_all(text) if doc is not None]
    except yaml.YAMLError as exc:
        where = ""
        mark = getattr(exc, "problem_mark", None)
        if mark is not None:
            where = f" at line {mark.line + 1}, column {mark.column + 1}"
        raise SpecError([Problem("", f"not valid YAML{where}: {getattr(exc, 'problem', exc)}")], source) from exc


def load_minicluster_file(path: str | Path) -> MiniCluster:
    """Read one MiniCluster from a YAML file (ours or the Flux Operator's, unchanged)."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError([Problem("", f"cannot read file: {exc.strerror or exc}")], source) from exc
    documents = parse_yaml_documents(text, source)
    if len(documents) != 1:
        raise SpecError([Problem("", f"expected exactly one MiniCluster document, found {len(documents)}")], source)
    return load_minicluster(documents[0], source)
