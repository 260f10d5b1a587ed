"""Users of the REST API: names and bcrypt password hashes in a small SQLite database in the state dir.

Each user also has a random token generation. Access tokens carry it, and a token is honoured only while it
matches: removing a user, adding one again under the same name or changing a password draws a new one, so every
token issued before stops working at once (a JWT cannot be recalled otherwise until it expires).
"""

from __future__ import annotations

import re
import secrets
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path

import bcrypt

from broker.errors import InputError

# Checked against when the user does not exist, so a wrong name costs as much time as a wrong password.
_DUMMY_HASH = bcrypt.hashpw(b"not-a-password", bcrypt.gensalt(rounds=10))
MAX_PASSWORD_BYTES = 72  # bcrypt's limit; longer passwords would be silently truncated
MAX_NAME_CHARS = 64
# Safe as a URL path segment, a Kubernetes label value and a Unix account name; `@` for e-mail-like names.
NAME_PATTERN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.@-]*")
NAME_RULE = f"1-{MAX_NAME_CHARS} characters: letters, digits, '_', '.', '@', '-', not starting with '.', '@' or '-'"


class UserError(InputError):
    """A user operation that cannot be done; `field` names the input at fault and `reason` says why in words."""

    def __init__(self, message: str, field: str = "name", reason: str = "invalid") -> None:
        super().__init__(message)
        self.field = field
        self.reason = reason  # invalid, exists, missing


@dataclass(frozen=True)
class Principal:
    """An authenticated identity; in multi-user mode also the account jobs run as."""

    name: str
    is_superuser: bool = False


def check_name(name: str) -> str:
    """The user name, or UserError naming the `name` field."""
    if not name:
        raise UserError("name: must not be empty", "name")
    if len(name) > MAX_NAME_CHARS or not NAME_PATTERN.fullmatch(name):
        raise UserError(f"name {name[:80]!r}: {NAME_RULE}", "name")
    return name


def check_password(password: str) -> bytes:
    raw = password.encode()
    if not raw:
        raise UserError("password: must not be empty", "password")
    if len(raw) > MAX_PASSWORD_BYTES:
        raise UserError(f"password: longer than {MAX_PASSWORD_BYTES} bytes (bcrypt's limit)", "password")
    return raw


def _generation() -> str:
    return secrets.token_urlsafe(12)


class UserStore:
    """Thread-safe: FastAPI serves requests from a thread pool. Several processes may open one database
    (the server and `python -m broker.rest.users_admin` in the lead pod): SQLite serialises their writes."""

    def __init__(self, path: str | Path, rounds: int = 12) -> None:
        self.path = Path(path)
        self.rounds = rounds
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS users (name TEXT PRIMARY KEY, hash BLOB NOT NULL, superuser INTEGER NOT NULL)"
        )
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(users)")}
        if "generation" not in columns:  # a database from before token revocation
            self._db.execute("ALTER TABLE users ADD COLUMN generation TEXT NOT NULL DEFAULT ''")
            for (name,) in self._db.execute("SELECT name FROM users").fetchall():
                self._db.execute("UPDATE users SET generation=? WHERE name=?", (_generation(), name))
        self.path.chmod(0o600)

    def _hash(self, password: str) -> bytes:
        return bcrypt.hashpw(check_password(password), bcrypt.gensalt(rounds=self.rounds))

    def add(self, name: str, password: str, superuser: bool = False) -> Principal:
        check_name(name)
        hashed = self._hash(password)
        with self._lock:
            try:
                self._db.execute(
                    "INSERT INTO users (name, hash, superuser, generation) VALUES (?, ?, ?, ?)",
                    (name, hashed, int(superuser), _generation()),
                )
            except sqlite3.IntegrityError as exc:
                raise UserError(f"name: user {name!r} already exists", "name", "exists") from exc
        return Principal(name, superuser)

    def ensure(self, name: str, password: str, superuser: bool = False) -> Principal:
        """Create or update (the superuser from the spec/environment is set at every start). Tokens stay valid
        when nothing changed, so a server restart does not log everyone out."""
        current = self.authenticate(name, password)
        if current is not None and current.is_superuser == superuser:
            return current
        hashed = self._hash(password)
        with self._lock:
            self._db.execute(
                "INSERT INTO users (name, hash, superuser, generation) VALUES (?, ?, ?, ?) ON CONFLICT(name) "
                "DO UPDATE SET hash=excluded.hash, superuser=excluded.superuser, generation=excluded.generation",
                (name, hashed, int(superuser), _generation()),
            )
        return Principal(name, superuser)

    def set_password(self, name: str, password: str) -> None:
        """A new password; tokens issued under the old one stop working."""
        hashed = self._hash(password)
        with self._lock:
            changed = self._db.execute(
                "UPDATE users SET hash=?, generation=? WHERE name=?", (hashed, _generation(), name)
            ).rowcount
        if changed == 0:
            raise UserError(f"name: no user {name!r}", "name", "missing")

    def remove(self, name: str) -> None:
        with self._lock:
            if self._db.execute("DELETE FROM users WHERE name=?", (name,)).rowcount == 0:
                raise UserError(f"name: no user {name!r}", "name", "missing")

    def get(self, name: str) -> Principal | None:
        with self._lock:
            row = self._db.execute("SELECT superuser FROM users WHERE name=?", (name,)).fetchone()
        return Principal(name, bool(row[0])) if row else None

    def current(self, name: str) -> tuple[Principal, str] | None:
        """The user and their token generation in one read (every authenticated request asks for both)."""
        with self._lock:
            row = self._db.execute("SELECT superuser, generation FROM users WHERE name=?", (name,)).fetchone()
        return (Principal(name, bool(row[0])), str(row[1])) if row else None

    def generation(self, name: str) -> str | None:
        """The user's current token generation (None: no such user)."""
        with self._lock:
            row = self._db.execute("SELECT generation FROM users WHERE name=?", (name,)).fetchone()
        return str(row[0]) if row else None

    def names(self) -> list[str]:
        with self._lock:
            return [row[0] for row in self._db.execute("SELECT name FROM users ORDER BY name")]

    def principals(self) -> list[Principal]:
        with self._lock:
            rows = self._db.execute("SELECT name, superuser FROM users ORDER BY name").fetchall()
        return [Principal(name, bool(superuser)) for name, superuser in rows]

    def authenticate(self, name: str, password: str) -> Principal | None:
        with self._lock:
            row = self._db.execute("SELECT hash, superuser FROM users WHERE name=?", (name,)).fetchone()
        raw = password.encode()[: MAX_PASSWORD_BYTES + 1]
        if row is None:
            bcrypt.checkpw(raw[:MAX_PASSWORD_BYTES], _DUMMY_HASH)
            return None
        if len(raw) > MAX_PASSWORD_BYTES or not bcrypt.checkpw(raw, row[0]):
            return None
        return Principal(name, bool(row[1]))

    def close(self) -> None:
        with self._lock:
            self._db.close()
