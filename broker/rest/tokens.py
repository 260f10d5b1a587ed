"""JSON Web Tokens: the client handshake (signed with the shared secret) and server-issued access tokens."""

from __future__ import annotations

import functools
import sys
import time
import warnings
from dataclasses import dataclass

import jwt
from jwt.warnings import InsecureKeyLengthWarning

from broker.errors import InputError

ALGORITHM = "HS256"
HANDSHAKE_SCOPE = "token"
MIN_KEY_BYTES = 32  # RFC 7518 section 3.2: an HS256 key at least as long as the hash

# PyJWT would repeat its warning (with a file and line of its own) on every token; short_key_warning says it once.
warnings.filterwarnings("ignore", category=InsecureKeyLengthWarning)
_warned: set[str] = set()


def short_key_warning(variable: str, key: str) -> str | None:
    """Say once per variable, in words, that a key is too short; returns the message (None when the key is fine)."""
    length = len(key.encode())
    if not key or length >= MIN_KEY_BYTES:
        return None
    message = (
        f"warning: {variable} is only {length} bytes; a key shorter than {MIN_KEY_BYTES} bytes can be guessed "
        f"from one captured token. Make a longer one with: python3 -c 'import secrets; print(secrets.token_hex(32))'"
    )
    if variable not in _warned:
        _warned.add(variable)
        print(message, file=sys.stderr)
    return message


class TokenError(InputError):
    """Malformed, expired, tampered or foreign token (the message says which, for the server log)."""


@dataclass(frozen=True)
class AccessClaims:
    subject: str
    expires: float
    generation: str = ""
    """The user's token generation when it was issued (broker/rest/users.py): a changed one revokes the token."""


def issue_access_token(
    subject: str, signing_key: str, minutes: int, now: float | None = None, generation: str = ""
) -> str:
    issued = time.time() if now is None else now
    payload = {"sub": subject, "iat": int(issued), "exp": int(issued + minutes * 60), "typ": "access"}
    if generation:
        payload["gen"] = generation
    return jwt.encode(payload, signing_key, algorithm=ALGORITHM)


def decode_access_token(token: str, signing_key: str, now: float | None = None) -> AccessClaims:
    """The token's claims, or TokenError. A token's signature is checked once and its claims remembered
    (`_verified`): a client sends the same token with every request, and the HMAC and the JSON of a check
    were a tenth of the REST server's work per request. Expiry is checked on every use."""
    claims = _verified(token, signing_key)
    if (time.time() if now is None else now) >= claims.expires:
        raise TokenError("access token expired")
    return claims


@functools.lru_cache(maxsize=4096)
def _verified(token: str, signing_key: str) -> AccessClaims:
    """A checked token's claims (only good tokens are remembered: an exception is never cached)."""
    try:
        payload = jwt.decode(token, signing_key, algorithms=[ALGORITHM], options={"require": ["sub", "exp"]})
    except jwt.ExpiredSignatureError as exc:
        raise TokenError("access token expired") from exc
    except jwt.PyJWTError as exc:
        raise TokenError("invalid token") from exc  # the decoder's words would describe our internals
    if payload.get("typ") != "access" or not isinstance(payload.get("sub"), str):
        raise TokenError("invalid token: not an access token")
    generation = payload.get("gen", "")
    return AccessClaims(payload["sub"], float(payload["exp"]), generation if isinstance(generation, str) else "")


def encode_handshake(user: str, password: str, secret_key: str) -> str:
    """What a client sends to /v1/token: {"user", "pass", "scope": "token"} signed with the shared secret."""
    return jwt.encode({"user": user, "pass": password, "scope": HANDSHAKE_SCOPE}, secret_key, algorithm=ALGORITHM)


def decode_handshake(token: str, secret_key: str) -> tuple[str, str]:
    try:
        payload = jwt.decode(token, secret_key, algorithms=[ALGORITHM])
    except jwt.PyJWTError as exc:
        raise TokenError("invalid token") from exc
    user, password = payload.get("user"), payload.get("pass")
    if payload.get("scope") != HANDSHAKE_SCOPE or not isinstance(user, str) or not isinstance(password, str):
        raise TokenError("handshake token must carry user, pass and scope 'token'")
    return user, password
