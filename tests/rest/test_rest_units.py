"""REST API building blocks: the user database, tokens, settings and submit-parameter validation."""

from __future__ import annotations

import time
from pathlib import Path

import jwt
import pytest

from broker.rest.jobs import SubmitError, parse_submit
from broker.rest.settings import RestSettings, SettingsError
from broker.rest.tokens import (
    TokenError,
    decode_access_token,
    decode_handshake,
    encode_handshake,
    issue_access_token,
)
from broker.rest.users import UserError, UserStore

KEY = "server-signing-key-0123456789abcdef0123"
OTHER = "another-signing-key-0123456789abcdef012"
SHARED = "shared-handshake-secret-0123456789abcdef"


@pytest.fixture
def store(tmp_path: Path) -> UserStore:
    return UserStore(tmp_path / "users.db", rounds=4)


def test_users_are_stored_hashed_and_checked(store: UserStore, tmp_path: Path) -> None:
    store.add("ada", "s3cret")
    assert store.authenticate("ada", "s3cret") is not None
    assert store.authenticate("ada", "wrong") is None
    assert store.authenticate("nobody", "s3cret") is None
    assert b"s3cret" not in (tmp_path / "users.db").read_bytes()
    assert (tmp_path / "users.db").stat().st_mode & 0o077 == 0
    with pytest.raises(UserError, match="already exists"):
        store.add("ada", "x")
    with pytest.raises(UserError, match="72 bytes"):
        store.add("bob", "x" * 73)
    with pytest.raises(UserError, match=r"name .has space.: 1-64 characters"):
        store.add("has space", "x")
    store.ensure("root-admin", "pw", superuser=True)
    store.ensure("root-admin", "pw2", superuser=True)
    assert store.authenticate("root-admin", "pw2") is not None and store.get("root-admin").is_superuser  # type: ignore[union-attr]


def test_access_tokens_expire_and_cannot_be_forged() -> None:
    token = issue_access_token("ada", KEY, minutes=1)
    assert decode_access_token(token, KEY).subject == "ada"
    with pytest.raises(TokenError, match="invalid"):
        decode_access_token(token, OTHER)
    expired = issue_access_token("ada", KEY, minutes=1, now=time.time() - 120)
    with pytest.raises(TokenError, match="expired"):
        decode_access_token(expired, KEY)
    header, _payload, signature = token.split(".")
    forged = jwt.encode({"sub": "root", "exp": int(time.time()) + 60, "typ": "access"}, OTHER, algorithm="HS256")
    with pytest.raises(TokenError):
        decode_access_token(f"{header}.{forged.split('.')[1]}.{signature}", KEY)
    # a handshake token (signed with the shared secret) is not an access token
    with pytest.raises(TokenError):
        decode_access_token(encode_handshake("ada", "pw", KEY), KEY)
    unsigned = jwt.encode({"sub": "root", "exp": int(time.time()) + 60, "typ": "access"}, None, algorithm="none")
    with pytest.raises(TokenError):
        decode_access_token(unsigned, KEY)


def test_handshake_round_trip() -> None:
    assert decode_handshake(encode_handshake("ada", "pw", SHARED), SHARED) == ("ada", "pw")
    with pytest.raises(TokenError):
        decode_handshake(encode_handshake("ada", "pw", SHARED), OTHER)
    bad_scope = jwt.encode({"user": "a", "pass": "b", "scope": "build"}, SHARED, algorithm="HS256")
    with pytest.raises(TokenError, match="scope"):
        decode_handshake(bad_scope, SHARED)


def test_settings_from_environment(tmp_path: Path) -> None:
    settings = RestSettings.from_env(tmp_path, {"FLUX_USER": "ada", "FLUX_TOKEN": "pw"})
    assert settings.port == 5000 and settings.require_auth and settings.mode == "single-user"
    assert len(settings.token_signing_key) > 40
    again = RestSettings.from_env(tmp_path, {})
    assert again.token_signing_key == settings.token_signing_key  # persisted, tokens survive restarts
    for env, fragment in [
        ({"FLUX_SERVER_MODE": "many"}, "FLUX_SERVER_MODE"),
        ({"FLUX_REQUIRE_AUTH": "maybe"}, "FLUX_REQUIRE_AUTH"),
        ({"FLUX_USER": "ada"}, "FLUX_USER and FLUX_TOKEN"),
        ({"FLUX_ACCESS_TOKEN_EXPIRES_MINUTES": "0"}, "FLUX_ACCESS_TOKEN_EXPIRES_MINUTES"),
        ({"FLUX_RESTFUL_PORT": "http"}, "FLUX_RESTFUL_PORT"),
    ]:
        with pytest.raises(SettingsError, match=fragment):
            RestSettings.from_env(tmp_path, env)


def test_submit_parameters_from_a_query_string() -> None:
    request = parse_submit(
        {
            "command": "mpi-hello --verbose 'two words'",
            "num_tasks": "4",
            "num_nodes": "2",
            "cores_per_task": "2",
            "exclusive": "true",
            "option_flags": "cpu-affinity=per-task,pmpi=1",
            "envars": "A=1,B=two",
            "workdir": "/tmp",
            "runtime": "60",
        }
    )
    assert request.command == ["mpi-hello", "--verbose", "two words"]
    assert (request.num_tasks, request.num_nodes, request.cores_per_task) == (4, 2, 2)
    assert request.exclusive and request.runtime == 60.0 and request.workdir == "/tmp"
    assert request.envars == {"A": "1", "B": "two"}
    assert request.option_flags == {"cpu-affinity": "per-task", "pmpi": "1"}


def test_submit_parameters_from_json() -> None:
    request = parse_submit({"command": ["sleep", "1"], "num_tasks": 2, "envars": {"X": "y"}, "exclusive": False})
    assert request.command == ["sleep", "1"] and request.num_tasks == 2 and request.envars == {"X": "y"}


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({}, "command"),
        ({"command": ""}, "command"),
        ({"command": "'unclosed"}, "command"),
        ({"command": "x" * 70000}, "command"),
        ({"command": "true", "num_tasks": "lots"}, "num_tasks"),
        ({"command": "true", "num_tasks": 0}, "num_tasks"),
        ({"command": "true", "num_nodes": -1}, "num_nodes"),
        ({"command": "true", "cores_per_task": True}, "cores_per_task"),
        ({"command": "true", "exclusive": "perhaps"}, "exclusive"),
        ({"command": "true", "exclusive": True}, "exclusive"),
        ({"command": "true", "envars": "NOEQUALS"}, "envars"),
        ({"command": "true", "envars": {"A": [1]}}, "envars"),
        ({"command": "true", "runtime": "-5"}, "runtime"),
        ({"command": "true", "colour": "red"}, "colour"),
        ({"command": "true", "is_launcher": True}, "is_launcher"),
    ],
)
def test_bad_submit_parameters_name_the_field(params: dict, field: str) -> None:
    with pytest.raises(SubmitError) as caught:
        parse_submit(params)
    assert any(error.startswith(f"{field}:") for error in caught.value.errors), caught.value.errors
