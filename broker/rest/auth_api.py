"""Signing in over the API: how to authenticate (/v1/auth), and tokens for a handshake JWT or a password
(/v1/token, /v1/login/access-token). A refusal is 400 (OAuth2 invalid_grant), never 401: clients answer a 401
by coming back here."""

# No `from __future__ import annotations`: FastAPI reads the parameters' annotations at runtime.

from typing import Annotated, TypedDict

from fastapi import APIRouter, Form, Request
from fastapi.responses import JSONResponse

from broker.rest.auth import issue_token
from broker.rest.identity import basic_credentials
from broker.rest.schemas import DENIED
from broker.rest.state import Rest
from broker.rest.tokens import TokenError, decode_handshake
from broker.rest.users import Principal

router = APIRouter(tags=["auth"])


class AuthInfo(TypedDict):
    """GET /v1/auth."""

    backend: str
    password_login: bool
    shared_secret_handshake: bool


def denied(reason: str) -> JSONResponse:
    """A refused token request: 400 with the reference server's {"Message": "Denied"} (and why, in `detail`)."""
    return JSONResponse({"Message": "Denied", "detail": reason}, status_code=400)


@router.get("/v1/auth", response_model=dict)  # the free-form object its schema has always said
def auth_info(rest: Rest) -> AuthInfo:
    """How to authenticate here (public), as the reference server describes it."""
    settings = rest.settings
    backend = "shared-secret" if settings.secret_key else "database"
    return {
        "backend": backend if settings.require_auth else "none",
        "password_login": settings.require_auth,
        "shared_secret_handshake": bool(settings.require_auth and settings.secret_key),
    }


def _principal_of(rest: Rest, scheme: str, credentials: str) -> Principal | str:
    """Who the credentials of a token request name, or why they are refused."""
    if scheme == "bearer" and credentials and rest.settings.secret_key:
        try:
            user, password = decode_handshake(credentials.strip(), rest.settings.secret_key)
        except TokenError as exc:
            return str(exc)
        return rest.users.authenticate(user, password) or "incorrect user or password"
    if scheme == "basic" and credentials:
        pair = basic_credentials(credentials.strip())
        principal = rest.users.authenticate(*pair) if pair else None
        return principal or "incorrect user or password"
    if scheme == "bearer" and credentials:
        return "the shared-secret token handshake is not enabled on this server (no FLUX_SECRET_KEY)"
    if not credentials:
        return "missing Authorization header"
    return "incorrect user or password"


@router.post("/v1/token", response_model=dict[str, str], responses=DENIED)
def token(request: Request, rest: Rest) -> dict[str, str] | JSONResponse:
    """Exchange a handshake JWT (signed with FLUX_SECRET_KEY) or Basic credentials for an access token.

    A refusal is 400 (OAuth2 invalid_grant), never 401: clients answer a 401 by coming back here.
    """
    scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
    principal = _principal_of(rest, scheme.lower(), credentials)
    if isinstance(principal, str):
        return denied(principal)
    return {"access_token": issue_token(rest.users, rest.settings, principal), "token_type": "Bearer"}


@router.post("/v1/login/access-token", response_model=dict[str, str], responses=DENIED)
def login(
    username: Annotated[str, Form()], password: Annotated[str, Form()], rest: Rest
) -> dict[str, str] | JSONResponse:
    """OAuth2 password flow (form fields username and password); a refusal is 400 as at /v1/token."""
    principal = rest.users.authenticate(username, password)
    if principal is None:
        return denied("incorrect user or password")
    return {"access_token": issue_token(rest.users, rest.settings, principal), "token_type": "bearer"}
