"""Who is asking: the one authentication of the REST API and the web pages (bearer tokens, HTTP Basic).

An unauthenticated request gets 401 with a `WWW-Authenticate` header naming /v1/token, where a client exchanges
an HS256 handshake JWT (or HTTP Basic credentials) for a bearer access token (broker/rest/auth_api.py).
"""

from __future__ import annotations

import base64
import binascii
import os
import pwd
from dataclasses import dataclass, field

from fastapi import HTTPException, Request
from starlette.concurrency import run_in_threadpool

from broker.rest.auth import token_principal
from broker.rest.settings import RestSettings
from broker.rest.tokens import TokenError
from broker.rest.users import Principal, UserStore


def unauthorized(request: Request, detail: str) -> HTTPException:
    """401 with the challenge naming this server's /v1/token."""
    base = str(request.base_url).rstrip("/")
    challenge = f'Bearer realm="{base}/v1/token",service="{base}",scope="job"'
    return HTTPException(status_code=401, detail=detail, headers={"WWW-Authenticate": challenge})


def basic_credentials(header: str) -> tuple[str, str] | None:
    """(user, password) of an HTTP Basic credential, None when it is not one."""
    try:
        decoded = base64.b64decode(header, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, sep, password = decoded.partition(":")
    return (user, password) if sep else None


def _server_account() -> Principal:
    """Everyone, on a server without authentication: the server's own account, as a superuser."""
    return Principal(name=pwd.getpwuid(os.getuid()).pw_name, is_superuser=True)


@dataclass
class Authenticator:
    """Turns a request's Authorization header into a Principal, or HTTPException 401 with its challenge."""

    settings: RestSettings
    users: UserStore
    anonymous: Principal = field(default_factory=_server_account)

    def bearer_principal(self, header: str) -> Principal | None:
        """Who a bearer token names (anyone, with no authentication configured); None for other credentials,
        which only the route checks. Raises TokenError for a token that does not check out. The one token
        check of both current_user and the fast path (RestState.read_job_plainly)."""
        if not self.settings.require_auth:
            return self.anonymous
        scheme, _, credentials = header.partition(" ")
        if scheme.lower() == "bearer" and credentials:
            return token_principal(self.users, self.settings, credentials.strip())
        return None

    def current_user(self, request: Request) -> Principal:
        """The caller, or HTTPException 401 (blocking: a password is checked with bcrypt)."""
        header = request.headers.get("authorization", "")
        try:
            principal = self.bearer_principal(header)
        except TokenError as exc:
            raise unauthorized(request, str(exc)) from exc
        if principal is not None:
            return principal
        scheme, _, credentials = header.partition(" ")
        if scheme.lower() == "basic" and credentials:
            pair = basic_credentials(credentials.strip())
            principal = self.users.authenticate(*pair) if pair else None
            if principal is None:
                raise unauthorized(request, "incorrect user or password")
            return principal
        raise unauthorized(request, "authentication required")

    async def current_user_async(self, request: Request) -> Principal:
        """current_user from the event loop: a bearer token is checked there (an HMAC and one read of the user
        database by its key, microseconds); a password (bcrypt: tens of ms of CPU) is checked in a thread."""
        scheme = request.headers.get("authorization", "").partition(" ")[0].lower()
        if not self.settings.require_auth or scheme == "bearer":
            return self.current_user(request)
        return await run_in_threadpool(self.current_user, request)
