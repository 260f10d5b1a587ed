"""What every request body passes before any route sees it: a size limit, and for JSON a nesting limit.

Plain ASGI rather than Starlette's BaseHTTPMiddleware, which runs every request through an extra task and
stream. A body over the size limit is refused before it is read (413), or as soon as its chunks pass the limit.
A JSON body (a content type naming json) is read whole first, which the size limit bounds, and refused (400,
naming the problem) when it nests deeper than broker/jsondepth.py allows: Python's json module recursed once a
level and a body 1,000 levels deep was a RecursionError, a 500, on every route that reads JSON (issue 41). The
route then reads the same bytes, so no parser, model or route ever sees a body that deep."""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from broker.errors import BrokerBaseError
from broker.jsondepth import MAX_DEPTH, depth_problem, too_deep


class BodyTooLarge(BrokerBaseError):
    """A body (sent without a Content-Length, in chunks) grew past the limit while being read."""


class BodyLimit:
    """Refuse oversized bodies before reading them (a hostile client cannot exhaust memory), and JSON bodies
    nested past `max_depth` before any route parses them."""

    def __init__(self, app: ASGIApp, limit: int, max_depth: int = MAX_DEPTH) -> None:
        self.app = app
        self.limit = limit
        self.max_depth = max_depth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        length = headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > self.limit):
            await self.too_large()(scope, receive, send)
            return
        if "json" in headers.get("content-type", "").lower():
            await self._checked_json(scope, receive, send)
            return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:
                raise BodyTooLarge()
            return message

        await self.app(scope, counted if length is None else receive, send)

    async def _checked_json(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Read the whole body (at most `limit` bytes), check its nesting, then hand the app the same bytes."""
        chunks: list[bytes] = []
        seen = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away before its body arrived: nobody to answer
            chunk = message.get("body", b"")
            seen += len(chunk)
            if seen > self.limit:
                await self.too_large()(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        if too_deep(body, self.max_depth):
            await self.too_deep()(scope, receive, send)
            return
        given = False

        async def replay() -> Message:
            nonlocal given
            if given:
                return await receive()  # after the body: the disconnect, when it comes
            given = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

    def too_large(self) -> JSONResponse:
        return JSONResponse({"Message": f"request body larger than {self.limit} bytes"}, status_code=413)

    def too_deep(self) -> JSONResponse:
        return JSONResponse(
            {"Message": "Invalid request body", "Errors": [f"body: {depth_problem(self.max_depth)}"]}, status_code=400
        )
