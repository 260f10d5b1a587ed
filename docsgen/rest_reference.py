"""The REST reference page, rendered from the FastAPI app's own OpenAPI document (what `/openapi.json` serves).

The app is built with a job service that is never called: only its routes and models matter here."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Literal, TypedDict, cast

from docsgen.markdown_cells import cell

Method = Literal["get", "post", "put", "patch", "delete"]
METHODS: tuple[Method, ...] = ("get", "post", "put", "patch", "delete")

# The parts of an OpenAPI 3.1 document (and its JSON Schemas) the page renders; the rest is not read.
Schema = TypedDict(
    "Schema",
    {
        "$ref": str,
        "anyOf": list["Schema"],
        "oneOf": list["Schema"],
        "allOf": list["Schema"],
        "type": str,
        "items": "Schema",
        "enum": list[object],
        "minimum": float,
        "maximum": float,
        "title": str,
        "description": str,
        "properties": dict[str, "Schema"],
        "required": list[str],
    },
    total=False,
)
Parameter = TypedDict(
    "Parameter",
    {"name": str, "in": str, "required": bool, "schema": Schema, "description": str},
    total=False,
)


class MediaType(TypedDict, total=False):
    schema: Schema


class RequestBody(TypedDict, total=False):
    content: dict[str, MediaType]
    required: bool


class Answer(TypedDict, total=False):
    description: str
    content: dict[str, MediaType]


class Operation(TypedDict, total=False):
    summary: str
    description: str
    parameters: list[Parameter]
    requestBody: RequestBody
    responses: dict[str, Answer]


class Info(TypedDict, total=False):
    title: str
    version: str
    description: str


class Components(TypedDict, total=False):
    schemas: dict[str, Schema]


class OpenApi(TypedDict, total=False):
    """An OpenAPI document, as far as the page reads it."""

    info: Info
    paths: dict[str, dict[Method, Operation]]
    components: Components


class _NoInstance:
    """Stands in for the instance: building the app reads routes, never jobs."""


def openapi_document() -> OpenApi:
    from broker.rest.app import create_app
    from broker.rest.settings import RestSettings

    with tempfile.TemporaryDirectory(prefix="mc-docs-") as state:
        app = create_app(RestSettings(state_dir=Path(state), require_auth=False), _NoInstance())  # type: ignore[arg-type]
        return cast(OpenApi, app.openapi())


def _anchor(name: str) -> str:
    return "schema-" + name.lower().replace("_", "-")


def _type(schema: Schema) -> str:
    """A schema's type in a few words, with links to named schemas."""
    if "$ref" in schema:
        name = str(schema["$ref"]).rsplit("/", 1)[-1]
        return f"[{name}](#{_anchor(name)})"
    for parts in (schema.get("anyOf"), schema.get("oneOf"), schema.get("allOf")):
        if parts is not None:
            return " or ".join(_type(part) for part in parts)
    kind = schema.get("type", "any")
    if kind == "array":
        return f"array of {_type(schema.get('items', {}))}"
    if "enum" in schema:
        return kind + ": " + ", ".join(f"`{value}`" for value in schema["enum"])
    bounds = [f"{word} {value}" for value, word in ((schema.get("minimum"), "≥"), (schema.get("maximum"), "≤"))
              if value is not None]  # fmt: skip
    return kind + (f" ({', '.join(bounds)})" if bounds else "")


def _operation(path: str, method: str, operation: Operation) -> list[str]:
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


def _schema(name: str, schema: Schema) -> list[str]:
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


def rest_page(document: OpenApi | None = None) -> str:
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
