"""The fake API server's `x-kubernetes-validations`: a custom resource's CEL rules, evaluated (cel-python) where
the CRD's schema carries them, on the object as the real server sees it (each object's schema defaults applied
first), answered in the real server's words (v1.37.2, seen on the cluster of `minicluster kube up`):

    MiniCluster.miniclusters.dev "bad" is invalid: spec.maxSize: Invalid value: maxSize (2) must not be ...

and, when several rules fail, every one of them in brackets, comma-separated.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import celpy


def _format(template: Any, args: Any) -> Any:
    """Kubernetes' strings library `'...%d...'.format([...])` (cel-go's ext.Strings), for the verbs our rules use."""
    values, out, i = list(args), [], 0
    text = str(template)
    while i < len(text):
        if text[i] == "%" and i + 1 < len(text):
            verb, i = text[i + 1], i + 2
            if verb == "%":
                out.append("%")
            elif verb in "ds":
                out.append(str(values.pop(0)) if verb == "s" else str(int(values.pop(0))))
            else:
                raise ValueError(f"format verb %{verb} is not in the fake's CEL")
        else:
            out.append(text[i])
            i += 1
    return celpy.celtypes.StringType("".join(out))


@functools.cache
def cel_program(expression: str) -> Any:
    env = celpy.Environment()
    return env.program(env.compile(expression), functions={"format": _format})


def _defaulted(schema: dict[str, Any], value: dict[str, Any]) -> dict[str, Any]:
    """The object with its schema's defaults, at every depth (the server defaults the whole object before any
    rule runs: a rule on spec sees spec.multiplexing.max even when the YAML gave only spec.multiplexing.total)."""
    properties = schema.get("properties") or {}
    out = {**{k: s["default"] for k, s in properties.items() if "default" in s and k not in value}, **value}
    for name, child in properties.items():
        if isinstance(out.get(name), dict) and child.get("type") == "object":
            out[name] = _defaulted(child, out[name])
    return out


def violations(schema: dict[str, Any], value: Any, path: str) -> Iterator[str]:
    """`path.field: Invalid value: message` for each rule that does not hold, outermost first."""
    if isinstance(value, dict):
        value = _defaulted(schema, value)
        for rule in schema.get("x-kubernetes-validations") or []:
            activation = {"self": celpy.json_to_cel(value)}
            if cel_program(rule["rule"]).evaluate(activation):
                continue
            message = (
                cel_program(rule["messageExpression"]).evaluate(activation)
                if "messageExpression" in rule
                else rule.get("message") or f"failed rule: {rule['rule']}"
            )
            yield f"{path}{rule.get('fieldPath', '')}: Invalid value: {message}"
        for name, child in (schema.get("properties") or {}).items():
            if name in value:
                yield from violations(child, value[name], f"{path}.{name}")
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            yield from violations(schema["items"], item, f"{path}[{index}]")


def refusal(schema: dict[str, Any], obj: dict[str, Any], kind: str, group: str) -> str | None:
    """The 422 message for ``obj`` when a rule does not hold, else None."""
    found = [v for name in ("spec",) if name in obj for v in violations(schema["properties"][name], obj[name], name)]
    if not found:
        return None
    name = obj.get("metadata", {}).get("name")
    listed = found[0] if len(found) == 1 else f"[{', '.join(found)}]"
    return f'{kind}.{group} "{name}" is invalid: {listed}'
