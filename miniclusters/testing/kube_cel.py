"""The fake API server's `x-kubernetes-validations`: a custom resource's CEL rules, evaluated (cel-python) where
the CRD's schema carries them, on the object as the real server sees it (each object's schema defaults applied
first), answered in the real server's words (v1.37.2, seen on the cluster of `minicluster kube up`):

    MiniCluster.miniclusters.dev "bad" is invalid: spec.maxSize: Invalid value: maxSize (2) must not be ...

and, when several rules fail, every one of them in brackets, comma-separated.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

import celpy
import celpy.adapter
import celpy.evaluation
from kubernetes.utils import quantity as kube_quantity

# The client's quantity parser (what the real apiserver's CEL `quantity()` accepts); untyped upstream.
parse_quantity: Callable[[str], Decimal] = kube_quantity.parse_quantity


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


def _is_quantity(text: Any) -> Any:
    try:
        parse_quantity(str(text))
    except (ValueError, TypeError, ArithmeticError):
        return celpy.celtypes.BoolType(False)
    return celpy.celtypes.BoolType(True)


def _quantity(text: Any) -> Any:
    """Kubernetes' quantity library's `quantity()`: the fake keeps its value as a number (enough to compare)."""
    try:
        return celpy.celtypes.DoubleType(parse_quantity(str(text)))
    except (ValueError, TypeError, ArithmeticError) as exc:
        return celpy.evaluation.CELEvalError(str(exc))  # an error value: `true || error` is true in CEL


def _is_less_than(a: Any, b: Any) -> Any:
    return celpy.celtypes.BoolType(float(a) < float(b))


FUNCTIONS: dict[str, Any] = {  # open: OpenAPI schemas and CEL values of any shape
    "format": _format,
    "isQuantity": _is_quantity,
    "quantity": _quantity,
    "isLessThan": _is_less_than,
}
"""The Kubernetes CEL libraries our rules call, beyond cel-python's standard ones."""


@functools.cache
def cel_program(expression: str) -> Any:
    env = celpy.Environment()
    return env.program(env.compile(expression), functions=FUNCTIONS)


def _defaulted(schema: dict[str, Any], value: Any) -> Any:  # open: OpenAPI schemas and CEL values of any shape
    """The value with its schema's defaults, at every depth (the server defaults the whole object before any
    rule runs: a rule on spec sees spec.multiplexing.max even when the YAML gave only spec.multiplexing.total, and
    a rule on spec reads containers[i].runFlux that no container wrote)."""
    if schema.get("type") == "number" and isinstance(value, int) and not isinstance(value, bool):
        return float(value)  # the server's CEL types a number field as double, however the YAML wrote it
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [_defaulted(schema["items"], item) for item in value]
    if not isinstance(value, dict):
        return value
    properties = schema.get("properties") or {}
    if not properties and isinstance(schema.get("additionalProperties"), dict):
        return {key: _defaulted(schema["additionalProperties"], item) for key, item in value.items()}
    out = {**{k: s["default"] for k, s in properties.items() if "default" in s and k not in value}, **value}
    return {name: _defaulted(properties[name], item) if name in properties else item for name, item in out.items()}


# open: OpenAPI schemas and CEL values of any shape
def violations(schema: dict[str, Any], value: Any, path: str) -> Iterator[str]:
    """`path.field: Invalid value: message` for each rule that does not hold, outermost first."""
    if isinstance(value, dict):
        value = _defaulted(schema, value)
        for rule in schema.get("x-kubernetes-validations") or []:
            activation = {"self": celpy.adapter.json_to_cel(value)}
            if cel_program(rule["rule"]).evaluate(activation):
                continue
            message = (
                cel_program(rule["messageExpression"]).evaluate(activation)
                if "messageExpression" in rule
                else rule.get("message") or f"failed rule: {rule['rule']}"
            )
            where = f"{path}{rule.get('fieldPath', '')}".lstrip(".")
            yield f"{where}: Invalid value: {message}"
        for name, child in (schema.get("properties") or {}).items():
            if name in value:
                yield from violations(child, value[name], f"{path}.{name}".lstrip("."))
        if not schema.get("properties") and isinstance(schema.get("additionalProperties"), dict):
            for key, item in value.items():  # a map's values: the server writes the key in brackets
                yield from violations(schema["additionalProperties"], item, f"{path}[{key}]")
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            yield from violations(schema["items"], item, f"{path}[{index}]")


# open: OpenAPI schemas and CEL values of any shape
def refusal(schema: dict[str, Any], obj: dict[str, Any], kind: str, group: str) -> str | None:
    """The 422 message for ``obj`` when a rule does not hold, else None."""
    found = list(violations({**schema, "properties": {"spec": schema["properties"]["spec"]}}, obj, ""))
    if not found:
        return None
    name = obj.get("metadata", {}).get("name")
    listed = found[0] if len(found) == 1 else f"[{', '.join(found)}]"
    return f'{kind}.{group} "{name}" is invalid: {listed}'
