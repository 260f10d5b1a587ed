"""The web interface on the lead, beside `/v1`: server-rendered pages (Jinja2), a little CSS and vanilla JS.

`mount_web(app, context)` is all the REST app calls; everything else lives in this package.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exception_handlers import request_validation_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.staticfiles import StaticFiles
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from broker.rest.messages import error_lines
from broker.rest.web import cluster, job_pages, session_pages
from broker.rest.web.cluster import ClusterSources
from broker.rest.web.context import WebContext
from broker.rest.web.pages import HERE, LoginRequired, PageError, login_redirect, render
from broker.rest.web.session import CsrfError, session_user

STATIC_PATH = "/web/static"
ROUTERS = (session_pages.router, job_pages.router, cluster.router)
PAGES = frozenset(getattr(route, "endpoint", None) for router in ROUTERS for route in router.routes)
"""The pages' endpoints: a bad query parameter of one of them is an error page, not the API's JSON."""


def mount_web(app: FastAPI, context: WebContext) -> None:
    app.state.web = context
    app.state.cluster = ClusterSources.of(context)
    for router in ROUTERS:
        app.include_router(router)
    app.mount(STATIC_PATH, StaticFiles(directory=HERE / "static"), name="web-static")
    app.add_exception_handler(LoginRequired, login_required)
    app.add_exception_handler(PageError, page_error)
    app.add_exception_handler(CsrfError, page_error)
    app.add_exception_handler(RequestValidationError, bad_parameters)


def error_page(request: Request, status: int, message: str) -> Response:
    """An error as a page (in a worker thread: finding the signed-in user reads the user database)."""
    context: WebContext = request.app.state.web
    user = session_user(request, context)
    return render(request, context, "error.html", {"message": message, "status": status}, user, status=status)


async def login_required(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, LoginRequired)
    return login_redirect(exc)


async def page_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, PageError | CsrfError)
    status, message = (exc.status, exc.message) if isinstance(exc, PageError) else (403, str(exc))
    return await run_in_threadpool(error_page, request, status, message)


async def bad_parameters(request: Request, exc: Exception) -> Response:
    """A page's bad query parameter is an error page naming it; the API keeps FastAPI's JSON answer."""
    assert isinstance(exc, RequestValidationError)
    if request.scope.get("endpoint") not in PAGES:
        return await request_validation_exception_handler(request, exc)
    problems = "; ".join(error_lines(exc.errors()))
    message = f"This page cannot be shown with those parameters: {problems}."
    return await run_in_threadpool(error_page, request, 400, message)


__all__ = ["WebContext", "mount_web"]
