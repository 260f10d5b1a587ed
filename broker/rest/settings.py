"""Server settings, read from the same environment variables flux-restful-api uses (so deployments carry over).

FLUX_SECRET_KEY is shared with clients for the token handshake only; access tokens are signed with
FLUX_TOKEN_SIGNING_KEY, which never leaves the server, so knowing the handshake secret cannot mint tokens.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from broker.errors import InputError
from broker.rest.tokens import MIN_KEY_BYTES, short_key_warning

ServerMode = Literal["single-user", "multi-user"]
DEFAULT_PORT = 5000
DEFAULT_TOKEN_MINUTES = 600


class SettingsError(InputError):
    """A setting that cannot be used; names the variable."""


def _flag(env: Mapping[str, str], name: str, default: bool) -> bool:
    value = env.get(name)
    if value is None or value == "":
        return default
    lowered = value.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise SettingsError(f"{name}={value!r}: expected true or false")


def _int(env: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    value = env.get(name)
    if value is None or value == "":
        return default
    try:
        number = int(value)
    except ValueError as exc:
        raise SettingsError(f"{name}={value!r}: expected an integer") from exc
    if not low <= number <= high:
        raise SettingsError(f"{name}={number}: expected {low}..{high}")
    return number


def _signing_key(state_dir: Path) -> str:
    """A random server-only key, kept in the state dir so tokens survive a server restart."""
    path = state_dir / "token-signing.key"
    if path.exists():
        return path.read_text().strip()
    state_dir.mkdir(parents=True, exist_ok=True)
    key = secrets.token_urlsafe(48)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(key)
    return key


@dataclass(frozen=True)
class RestSettings:
    state_dir: Path
    require_auth: bool = True
    secret_key: str = ""
    token_signing_key: str = ""
    superuser: str = ""
    superuser_password: str = ""
    mode: ServerMode = "single-user"
    token_minutes: int = DEFAULT_TOKEN_MINUTES
    host: str = "0.0.0.0"
    port: int = DEFAULT_PORT
    min_uid: int = 1000
    max_body_bytes: int = 1 << 20
    admin_users: frozenset[str] = field(default_factory=frozenset)

    @property
    def database(self) -> Path:
        return self.state_dir / "users.db"

    @classmethod
    def from_env(cls, state_dir: str | Path, env: Mapping[str, str] | None = None) -> RestSettings:
        env = os.environ if env is None else env
        state = Path(state_dir)
        mode = env.get("FLUX_SERVER_MODE", "single-user") or "single-user"
        if mode not in ("single-user", "multi-user"):
            raise SettingsError(f"FLUX_SERVER_MODE={mode!r}: expected single-user or multi-user")
        require_auth = _flag(env, "FLUX_REQUIRE_AUTH", True)
        superuser = env.get("FLUX_USER", "")
        password = env.get("FLUX_TOKEN", "")
        if require_auth and bool(superuser) != bool(password):
            raise SettingsError("FLUX_USER and FLUX_TOKEN must be given together")
        signing_key = env.get("FLUX_TOKEN_SIGNING_KEY", "")
        if signing_key and len(signing_key.encode()) < MIN_KEY_BYTES:
            raise SettingsError(
                f"FLUX_TOKEN_SIGNING_KEY is {len(signing_key.encode())} bytes: it must be at least {MIN_KEY_BYTES} "
                "(or leave it unset and the server keeps a random one in its state directory)"
            )
        short_key_warning("FLUX_SECRET_KEY", env.get("FLUX_SECRET_KEY", ""))
        return cls(
            state_dir=state,
            require_auth=require_auth,
            secret_key=env.get("FLUX_SECRET_KEY", ""),
            token_signing_key=signing_key or _signing_key(state),
            superuser=superuser,
            superuser_password=password,
            mode=mode,  # type: ignore[arg-type]
            token_minutes=_int(env, "FLUX_ACCESS_TOKEN_EXPIRES_MINUTES", DEFAULT_TOKEN_MINUTES, 1, 60 * 24 * 365),
            host=env.get("FLUX_RESTFUL_HOST", "0.0.0.0"),
            port=_int(env, "FLUX_RESTFUL_PORT", DEFAULT_PORT, 1, 65535),
            min_uid=_int(env, "FLUX_MIN_UID", 1000, 0, 2**31),
            admin_users=frozenset(u for u in env.get("FLUX_ADMIN_USERS", "").split(",") if u),
        )
