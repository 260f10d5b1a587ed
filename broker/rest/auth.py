"""Access tokens bound to the user database: issue one for a user, and turn one back into a user.

Every place that issues or accepts tokens (the /v1 API, the web pages' session cookie) goes through these two
functions, so a removed, re-added or re-passworded user's tokens stop working everywhere at once: a token
carries the user's token generation (broker/rest/users.py) and is refused once it no longer matches.
"""

from __future__ import annotations

from broker.rest.settings import RestSettings
from broker.rest.tokens import TokenError, decode_access_token, issue_access_token
from broker.rest.users import Principal, UserStore

REVOKED = "token revoked: the user was removed or re-added, or changed password"


def issue_token(users: UserStore, settings: RestSettings, principal: Principal) -> str:
    """A signed access token for `principal`, valid for settings.token_minutes or until revoked."""
    generation = users.generation(principal.name) or ""
    return issue_access_token(principal.name, settings.token_signing_key, settings.token_minutes, generation=generation)


def token_principal(users: UserStore, settings: RestSettings, token: str) -> Principal:
    """The user a token was issued to, or TokenError (expired, forged, of a removed user, or revoked)."""
    claims = decode_access_token(token, settings.token_signing_key)
    found = users.current(claims.subject)
    if found is None:
        raise TokenError("the token's user no longer exists")
    principal, generation = found
    if claims.generation != generation:
        raise TokenError(REVOKED)
    return principal
