"""The web interface on the lead, beside `/v1`: server-rendered pages (Jinja2), a little CSS and vanilla JS.

`mount_web(app, context)` is all the REST app calls; everything else lives in this package.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.staticfiles import StaticFiles
from starlette.responses import Response

from broker.rest.web.cluster import cluster_router
from broker.rest.web.context import WebContext
from broker.rest.web.pages import HERE, LoginRequired, PageError, login_redirect, render
from broker.rest.web.routes import job_router
from broker.rest.web.session import CsrfError, session_user

STATIC_PATH = "/web/static"


def mount_web(app: FastAPI, context: WebContext) -> None:
    app.include_router(job_router(context))
    app.include_router(cluster_router(context))
    app.mount(STATIC_PATH, StaticFiles(directory=HERE / "static"), name="web-static")

    async def login_required(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, LoginRequired)
        return login_redirect(exc)

    async def page_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, PageError | CsrfError)
        status, message = (exc.status, exc.message) if isinstance(exc, PageError) else (403, str(exc))
        user = session_user(request, context)
        return render(request, context, "error.html", {"message": message, "status": status}, user, status=status)

    app.add_exception_handler(LoginRequired, login_required)
    app.add_exception_handler(PageError, page_error)
    app.add_exception_handler(CsrfError, page_error)


__all__ = ["WebContext", "mount_web"]
