"""What the OpenAPI document says the API takes and answers, so schema-driven clients and fuzzers see the real API.

The submit endpoint reads its parameters itself (query string, form or JSON), so FastAPI cannot infer them;
they are described here from the same pydantic model that validates them.
"""

from __future__ import annotations

from typing import Any, TypedDict

from pydantic import BaseModel

from broker.rest.json_types import Responses
from broker.rest.submit import SubmitParams


class Detail(BaseModel):
    """FastAPI's error shape: 401 (with WWW-Authenticate), 403, 404."""

    detail: str


class Denied(BaseModel):
    """A refused token request (400), as the reference server answers it."""

    Message: str
    detail: str


class Submitted(BaseModel):
    Message: str
    id: int


class Invalid(BaseModel):
    """400 from submit: every error line names its field."""

    Message: str
    Errors: list[str]


class Cancelled(BaseModel):
    Message: str
    id: str


PROTECTED: Responses = {
    401: {"model": Detail, "description": "no or bad credentials; the WWW-Authenticate header names /v1/token"}
}
DENIED: Responses = {400: {"model": Denied, "description": "wrong credentials or token"}}
BAD_ID: Responses = {
    400: {"model": Detail, "description": "not a job id"},
    404: {"model": Detail, "description": "no such job (or not yours)"},
}


QueryParameter = TypedDict(
    "QueryParameter",
    {"name": str, "in": str, "required": bool, "description": str, "schema": dict[str, str | int]},
)
"""An OpenAPI parameter object, as submit's are described ("in" is a keyword: the functional form)."""


def _query_parameters() -> list[QueryParameter]:
    """The submit fields as query parameters: how the upstream Python client sends them (all text)."""
    out: list[QueryParameter] = []
    for name, info in SubmitParams.model_fields.items():
        out.append(
            {
                "name": name,
                "in": "query",
                "required": False,
                "description": info.description or name,
                "schema": {"type": "string", "maxLength": 1000},
            }
        )
    return out


def submit_openapi() -> dict[str, Any]:  # open: FastAPI's `openapi_extra`, any OpenAPI operation fields
    """`openapi_extra` for POST /v1/jobs/submit: the query parameters and the JSON and form bodies."""
    schema = SubmitParams.model_json_schema()
    form = {
        "type": "object",
        "properties": {name: {"type": "string"} for name in SubmitParams.model_fields},
        "required": ["command"],
        "additionalProperties": False,
    }
    return {
        "parameters": _query_parameters(),
        "requestBody": {
            "required": False,
            "content": {
                "application/json": {"schema": schema},
                "application/x-www-form-urlencoded": {"schema": form},
            },
        },
    }
