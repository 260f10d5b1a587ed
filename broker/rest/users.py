"""Users of the REST API: names and bcrypt password hashes in a small SQLite database in the state dir."""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path

import bcrypt

# Checked against when the user does not exist, so a wrong name costs as much time as a wrong password.
_DUMMY_HASH = bcrypt.hashpw(b"not-a-password", bcrypt.gensalt(rounds=10))
MAX_PASSWORD_BYTES = 72  # bcrypt's limit; longer passwords would be silently truncated


class UserError(ValueError):
    """A user operation that cannot be done (names the user)."""


@dataclass(frozen=True)
class Principal:
    """An authenticated identity; in multi-user mode also the account jobs run as."""

    name: str
    is_superuser: bool = False


class UserStore:
    """Thread-safe: FastAPI serves requests from a thread pool."""

    def __init__(self, path: str | Path, rounds: int = 12) -> None:
        self.path = Path(path)
        self.rounds = rounds
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS users (name TEXT PRIMARY KEY, hash BLOB NOT NULL, superuser INTEGER NOT NULL)"
        )
        self.path.chmod(0o600)

    def _hash(self, password: str) -> bytes:
        raw = password.encode()
        if not raw:
            raise UserError("password must not be empty")
        if len(raw) > MAX_PASSWORD_BYTES:
            raise UserError(f"password is longer than {MAX_PASSWORD_BYTES} bytes (bcrypt's limit)")
        return bcrypt.hashpw(raw, bcrypt.gensalt(rounds=self.rounds))

    def add(self, name: str, password: str, superuser: bool = False) -> Principal:
        if not name or len(name) > 64 or any(c.isspace() or c == ":" for c in name):
            raise UserError(f"user name {name!r}: 1-64 characters, no spaces or ':'")
        hashed = self._hash(password)
        with self._lock:
            try:
                self._db.execute("INSERT INTO users VALUES (?, ?, ?)", (name, hashed, int(superuser)))
            except sqlite3.IntegrityError as exc:
                raise UserError(f"user {name!r} already exists") from exc
        return Principal(name, superuser)

    def ensure(self, name: str, password: str, superuser: bool = False) -> Principal:
        """Create or update (the superuser from the spec/environment is set at every start)."""
        hashed = self._hash(password)
        with self._lock:
            self._db.execute(
                "INSERT INTO users VALUES (?, ?, ?) ON CONFLICT(name) DO UPDATE SET hash=excluded.hash, "
                "superuser=excluded.superuser",
                (name, hashed, int(superuser)),
            )
        return Principal(name, superuser)

    def remove(self, name: str) -> None:
        with self._lock:
            if self._db.execute("DELETE FROM users WHERE name=?", (name,)).rowcount == 0:
                raise UserError(f"no user {name!r}")

    def get(self, name: str) -> Principal | None:
        with self._lock:
            row = self._db.execute("SELECT superuser FROM users WHERE name=?", (name,)).fetchone()
        return Principal(name, bool(row[0])) if row else None

    def names(self) -> list[str]:
        with self._lock:
            return [row[0] for row in self._db.execute("SELECT name FROM users ORDER BY name")]

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
