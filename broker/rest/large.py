"""Answers that may hold thousands of jobs, encoded by orjson: a listing of 5,000 detailed records is 3 MB of
JSON, which the standard library's encoder takes about 150 ms to write and orjson about 10 (issue 27)."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.responses import JSONResponse


class LargeJSONResponse(JSONResponse):
    """JSONResponse's contract (application/json, no NaN, UTF-8), written by orjson (which writes NaN as null
    where the standard encoder, as Starlette configures it, refuses: our records hold no NaN)."""

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)
