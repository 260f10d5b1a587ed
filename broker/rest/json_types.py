"""The JSON shapes of the REST server that are open on purpose, each named once with why it is open.

Every fixed shape has a TypedDict or a pydantic model of its own (broker/rest/answers.py, schemas.py, topics.py,
job_record.py, the routers); these are the ones whose keys the server does not choose.
"""

from __future__ import annotations

from typing import Any

JsonObject = dict[str, Any]  # open: a request's JSON object before its model validates it (any keys, any values)
Responses = dict[int | str, dict[str, Any]]  # open: FastAPI's own type for a route's OpenAPI response objects
"""A route's `responses`: status code -> {"model": ..., "description": ...} (or any OpenAPI response object)."""
