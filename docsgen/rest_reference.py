"""The REST reference page, rendered from the FastAPI app's own OpenAPI document (what `/openapi.json` serves).

The app is built with a job service that is never called: only its routes and models matter here."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from docsgen.markdown_cells import cell

METHODS = ("get", "post", "put", "patch", "delete")


class _NoInstance:
    """Stands in for the instance: building the app reads routes, never jobs."""


def openapi_document() -> dict[str, Any]:  # open: the OpenAPI document FastAPI builds (JSON Schema inside)
    from broker.rest.app import create_app
    from broker.rest.settings import RestSettings

    with tempfile.TemporaryDirectory(prefix="mc-docs-") as state:
        app = create_app(RestSettings(state_dir=Path(state), require_auth=False), _NoInstance())  # type: ignore[arg-type]
        return app.openapi()


def _anchor(name: str) -> str:
    return "schema-" + name.lower().replace("_", "-")


def _type(schema: dict[str, Any]) -> str:  # open: a JSON Schema of the document
    """A schema's type in a few words, with links to named schemas."""
    if "$ref" in schema:
        name = str(schema["$ref"]).rsplit("/", 1)[-1]
        return f"[{name}](#{_anchor(name)})"
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            return " or ".join(_type(part) for part in schema[key])
    kind = str(schema.get("type", "any"))
    if kind == "array":
        return f"array of {_type(schema.get('items', {}))}"
    if "enum" in schema:
        return kind + ": " + ", ".join(f"`{value}`" for value in schema["enum"])
    bounds = [f"{word} {schema[key]}" for key, word in (("minimum", "≥"), ("maximum", "≤")) if key in schema]
    return kind + (f" ({', '.join(bounds)})" if bounds else "")


def _operation(path: str, method: str, operation: dict[str, Any]) -> list[str]:  # open: an OpenAPI operation
    lines = [f"### `{method.upper()} {path}`\n"]
    if operation.get("summary"):
        lines.append(f"**{operation['summary']}.** " + " ".join(operation.get("description", "").split()) + "\n")
    parameters = operation.get("parameters", [])
    if parameters:
        lines += ["| parameter | in | required | type | meaning |", "|---|---|---|---|---|"]
        for p in parameters:
            required = "yes" if p.get("required") else "no"
            schema = _type(p.get("schema", {}))
            lines.append(
                f"| `{p['name']}` | {p['in']} | {required} | {cell(schema)} | {cell(p.get('description', ''))} |"
            )
        lines.append("")
    body = operation.get("requestBody")
    if body:
        kinds = [f"`{kind}` ({_type(value.get('schema', {}))})" for kind, value in body.get("content", {}).items()]
        lines.append("Body: " + "; ".join(kinds) + ("" if body.get("required") else " (optional)") + "\n")
    lines += ["| answer | meaning | body |", "|---|---|---|"]
    for code, answer in operation.get("responses", {}).items():
        schemas = [_type(value.get("schema", {})) for value in answer.get("content", {}).values()]
        lines.append(f"| {code} | {cell(answer.get('description', ''))} | {cell(', '.join(schemas))} |")
    lines.append("")
    return lines


def _schema(name: str, schema: dict[str, Any]) -> list[str]:  # open: a JSON Schema of the document
    lines = [f"### {name} {{#{_anchor(name)}}}\n"]
    if schema.get("description"):
        lines.append(" ".join(schema["description"].split()) + "\n")
    properties = schema.get("properties", {})
    required = set(schema.get("required", []))
    if properties:
        lines += ["| field | type | required | meaning |", "|---|---|---|---|"]
        for field, spec in properties.items():
            meaning = spec.get("description", "")
            lines.append(
                f"| `{field}` | {cell(_type(spec))} | {'yes' if field in required else 'no'} | {cell(meaning)} |"
            )
    else:
        lines.append("`" + json.dumps({k: v for k, v in schema.items() if k != "title"}) + "`")
    lines.append("")
    return lines


def rest_page(document: dict[str, Any] | None = None) -> str:  # open: the OpenAPI document
    doc = document or openapi_document()
    info = doc["info"]
    lines = [
        "# REST API reference\n",
        f"{info.get('title', '')} {info.get('version', '')}: {info.get('description', '')} Rendered from the "
        "server's OpenAPI document when the site is built; a running server serves the same at "
        "`/openapi.json` (interactive at `/docs`). How it behaves, and where it differs from flux-restful-api "
        "on purpose: [REST API](../rest.md).\n",
        "## Endpoints\n",
    ]
    for path, item in doc["paths"].items():
        for method in METHODS:
            if method in item:
                lines += _operation(path, method, item[method])
    lines.append("## Schemas\n")
    for name, schema in doc.get("components", {}).get("schemas", {}).items():
        lines += _schema(name, schema)
    return "\n".join(lines)
