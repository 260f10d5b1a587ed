"""The browser session: the API's access token in an HttpOnly, SameSite=Strict cookie, and CSRF tokens.

The cookie carries the very token `/v1` issues, checked by the API's own authentication (so expiry and any
revocation apply to pages too). Forms carry a double-submit CSRF token: a random value in its own cookie that a
form must echo; a page from another site can neither read the cookie nor make the browser send it.
"""

from __future__ import annotations

import hmac
import secrets
from urllib.parse import urlsplit

from fastapi import HTTPException, Request
from starlette.responses import Response

from broker.errors import BrokerBaseError
from broker.rest.auth import issue_token
from broker.rest.users import Principal
from broker.rest.web.context import WebContext

SESSION_COOKIE = "mc_session"
CSRF_COOKIE = "mc_csrf"
CSRF_FIELD = "csrf_token"


class CsrfError(BrokerBaseError):
    """A state-changing form without the matching CSRF token (or from another origin)."""


def session_user(request: Request, context: WebContext) -> Principal | None:
    """The signed-in user (anyone, in no-auth mode), or None: the cookie's token goes through the API's check."""
    token = request.cookies.get(SESSION_COOKIE, "")
    headers = [(k, v) for k, v in request.scope["headers"] if k != b"authorization"]
    if token:
        headers.append((b"authorization", f"Bearer {token}".encode("latin-1", "replace")))
    try:
        return context.authenticate(Request({**request.scope, "headers": headers}))
    except HTTPException as exc:
        if exc.status_code == 401:
            return None
        raise


def issue_session(context: WebContext, principal: Principal) -> str:
    """The access token a login form gets: the same one `/v1/login/access-token` issues (revoked with it)."""
    return issue_token(context.users, context.settings, principal)


def set_session(response: Response, request: Request, token: str, minutes: int) -> None:
    response.set_cookie(
        SESSION_COOKIE,
        token,
        max_age=minutes * 60,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path="/",
    )


def clear_session(response: Response) -> None:
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict")


def csrf_token(request: Request) -> str:
    """This browser's CSRF token (a new one if it has none; `remember_csrf` stores it with the response)."""
    existing = request.cookies.get(CSRF_COOKIE, "")
    token = existing if len(existing) >= 32 else secrets.token_urlsafe(32)
    request.state.csrf = token
    return token


def remember_csrf(request: Request, response: Response) -> None:
    token = getattr(request.state, "csrf", None)
    if token and token != request.cookies.get(CSRF_COOKIE):
        response.set_cookie(
            CSRF_COOKIE, token, httponly=True, samesite="strict", secure=request.url.scheme == "https", path="/"
        )


def check_csrf(request: Request, submitted: object) -> None:
    """Refuse a form that does not echo this browser's CSRF cookie, or that comes from another origin."""
    origin = request.headers.get("origin")
    if origin and origin != "null":
        parts = urlsplit(origin)
        if parts.netloc != request.url.netloc:
            raise CsrfError(f"form posted from another origin ({origin})")
    cookie = request.cookies.get(CSRF_COOKIE, "")
    if not cookie or not isinstance(submitted, str) or not hmac.compare_digest(cookie, submitted):
        raise CsrfError("the form's CSRF token is missing or stale: reload the page and try again")


def safe_next(target: str | None) -> str:
    """Where to go after login: a path on this server only (never an open redirect)."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/jobs"
    return target
