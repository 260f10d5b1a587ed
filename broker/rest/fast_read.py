"""A GET of one job answered ahead of the framework: the REST API's hottest request, at a fraction of its cost.

Why: a dashboard or a client's wait loop asks `GET /v1/jobs/{id}` again and again, and on the built-in broker the
answer is one RPC on the server's event loop (broker/rest/async_broker.py). Measured with py-spy
(bench/bench_rest.py's single client), most of the server's CPU for it was not that RPC but the layers in front of
the route: Starlette's exception middleware and exit stack, the router's path matching, FastAPI's request object
and dependency solving. This ASGI layer sits in front of all of them (FrontedFastAPI) and answers the request when
it can be answered plainly: a well-formed id, a valid bearer token (or no authentication configured), a job the
caller may see. A request whose credentials are not plainly good (none, Basic, expired or revoked) goes on to the
route, which answers it (401 with its challenge); neither `receive` nor `send` has been touched by then. Once the
caller is known, the route's own lookup answers: its 400, 404 or 502 goes out through FastAPI's own HTTPException
handler (the app registers no other), so the answer is byte for byte the route's, and the instance is not asked
twice.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable

from fastapi import FastAPI, HTTPException
from fastapi.exception_handlers import http_exception_handler
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

JOB_PATH = re.compile(r"^/v1/jobs/([^/]+)$")
"""The route `GET /v1/jobs/{jobid}` (the id as the route gets it: the router does not decode it either)."""
NOT_A_JOB = frozenset({"search"})
"""Paths of that shape that are routes of their own (`/v1/jobs/search` is registered ahead of it)."""

ReadJob = Callable[[str, str], Awaitable[bytes | HTTPException | None]]
"""(jobid, Authorization header) -> the 200 body, the lookup's error, or None when the route must answer."""


class FrontedFastAPI(FastAPI):
    """FastAPI with one ASGI layer in front of everything it does for a request, set with `front`.

    `add_middleware` puts a middleware inside what FastAPI runs for every request first: its telemetry check
    (environment lookups, about 35 us), the server error handler, exception telemetry and the body limit. None of
    them has anything to do for a plain GET answered here: it has no body, an error of the lookup goes out
    through the HTTPException handler directly, and an unexpected exception still ends as a 500, from uvicorn
    instead of Starlette. Telemetry, when someone configures it, sees the requests that reach the routes."""

    front: Callable[[ASGIApp], ASGIApp] | None = None
    _fronted: ASGIApp | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.front is None:
            await super().__call__(scope, receive, send)
            return
        if self._fronted is None:
            self._fronted = self.front(super().__call__)
        await self._fronted(scope, receive, send)


class FastJobRead:
    """ASGI middleware: `GET /v1/jobs/{jobid}` through `read` when it succeeds, else on to `app`."""

    def __init__(self, app: ASGIApp, read: ReadJob) -> None:
        self.app = app
        self.read = read

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        jobid = _job_read(scope)
        if jobid is not None:
            authorization = ""
            for name, value in scope["headers"]:
                if name == b"authorization":
                    authorization = value.decode("latin-1")
                    break
            answer = await self.read(jobid, authorization)
            if isinstance(answer, bytes):
                await _send_json(send, answer)
                return
            if isinstance(answer, HTTPException):
                response = await http_exception_handler(Request(scope, receive), answer)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _job_read(scope: Scope) -> str | None:
    """The jobid of a plain `GET /v1/jobs/{jobid}` (no body, no query string), else None."""
    if scope["type"] != "http" or scope["method"] != "GET" or scope.get("query_string"):
        return None
    if scope.get("root_path"):
        return None  # mounted under a prefix: leave the path's meaning to the router
    match = JOB_PATH.match(scope["path"])
    if match is None or match.group(1) in NOT_A_JOB:
        return None
    for name, _value in scope["headers"]:
        if name in (b"content-length", b"transfer-encoding"):
            return None  # a GET with a body: the body limit and the route decide
    return match.group(1)


async def _send_json(send: Send, body: bytes) -> None:
    """The response JSONResponse would send for this body: same status, same headers."""
    headers = [(b"content-length", str(len(body)).encode("latin-1")), (b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})
