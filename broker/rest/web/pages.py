"""Rendering and the sign-in requirement shared by every page."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse
from starlette.responses import Response

from broker.errors import BrokerBaseError
from broker.rest.users import Principal
from broker.rest.web.context import WebContext
from broker.rest.web.session import CSRF_FIELD, csrf_token, remember_csrf, session_user

if TYPE_CHECKING:
    from fastapi.templating import Jinja2Templates

HERE = Path(__file__).resolve().parent


@functools.cache
def templates() -> Jinja2Templates:
    """The pages' Jinja2 templates, loaded at the first page shown: a server only ever asked for its API never
    imports Jinja2 (issue 27's memory target for the REST server)."""
    from fastapi.templating import Jinja2Templates

    return Jinja2Templates(directory=HERE / "templates")


class LoginRequired(BrokerBaseError):
    """No session: pages redirect to the login form, fragments answer 401 (the script then reloads)."""

    def __init__(self, target: str, fragment: bool) -> None:
        super().__init__(target)
        self.target = target
        self.fragment = fragment


class PageError(BrokerBaseError):
    """A page that cannot be shown (404 for a job that is missing or not the user's), answered as HTML."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def require_user(request: Request, context: WebContext, fragment: bool = False) -> Principal:
    user = session_user(request, context)
    if user is None:
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        raise LoginRequired(target, fragment)
    return user


def login_redirect(exc: LoginRequired) -> Response:
    if exc.fragment:
        return HTMLResponse("sign in again", status_code=401)
    return RedirectResponse(f"/login?next={quote(exc.target, safe='')}", status_code=303)


def render(
    request: Request,
    context: WebContext,
    name: str,
    values: dict[str, Any],  # open: a template's variables, whatever that page shows
    user: Principal | None = None,
    status: int = 200,
) -> Response:
    """A page (or fragment) with what every template may use: the user, the CSRF token, whether login exists."""
    shared = {
        "user": user,
        "auth": context.settings.require_auth,
        "csrf": csrf_token(request),
        "csrf_field": CSRF_FIELD,
        "mode": context.settings.mode,
    }
    response = templates().TemplateResponse(request, name, {**shared, **values}, status_code=status)
    response.headers["Cache-Control"] = "no-store"
    remember_csrf(request, response)
    return response
