"""REST API building blocks: the user database, tokens, settings and submit-parameter validation."""

from __future__ import annotations

import time
from pathlib import Path

import jwt
import pytest
from pydantic_core import ErrorDetails

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
    admin = store.get("root-admin")
    assert store.authenticate("root-admin", "pw2") is not None and admin is not None and admin.is_superuser


def test_access_tokens_expire_and_cannot_be_forged() -> None:
    token = issue_access_token("ada", KEY, minutes=1)
    claims = decode_access_token(token, KEY)
    assert claims.subject == "ada"
    with pytest.raises(TokenError, match="invalid"):
        decode_access_token(token, OTHER)  # a token checked with one key is not taken under another
    # checked once and remembered, a token still expires: the remembered claims are refused at their expiry
    with pytest.raises(TokenError, match="expired"):
        decode_access_token(token, KEY, now=claims.expires)
    assert decode_access_token(token, KEY, now=claims.expires - 1).subject == "ada"
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
    unsigned = jwt.encode({"sub": "root", "exp": int(time.time()) + 60, "typ": "access"}, "", algorithm="none")
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


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"command": "echo a\x00b"}, "command"),
        ({"command": ["echo", "a\x00b"]}, "command"),
        ({"command": "true", "workdir": "/tmp\x00/x"}, "workdir"),
        ({"command": "true", "envars": "A=1\x00"}, "envars"),
        ({"command": "true", "envars": {"A\x00": "1"}}, "envars"),
        ({"command": "true", "option_flags": {"cpu-affinity": "o\x00ff"}}, "option_flags"),
    ],
)
def test_a_nul_byte_is_refused_naming_its_field(params: dict, field: str) -> None:
    """exec(2), the environment and paths end at a NUL: the text would be cut short, not run as given."""
    with pytest.raises(SubmitError) as caught:
        parse_submit(params)
    assert f"{field}: " in caught.value.errors[0] and "NUL byte" in caught.value.errors[0], caught.value.errors


@pytest.mark.parametrize("command", ["", "   ", "''", '""', [], [""], ["", "arg"], [" "]])
def test_an_empty_command_is_refused(command: object) -> None:
    with pytest.raises(SubmitError) as caught:
        parse_submit({"command": command})
    assert caught.value.errors == [caught.value.errors[0]] and caught.value.errors[0].startswith("command: is empty")
    assert parse_submit({"command": ["echo", ""]}).command == ["echo", ""]  # an empty argument is fine


@pytest.mark.parametrize(
    "params",
    [
        {"command": "true", "num_tasks": "1.5"},
        {"command": "true", "num_tasks": "lots"},
        {"command": "true", "num_tasks": 0},
        {"command": "true", "num_tasks": 10**7},
        {"command": "true", "cores_per_task": True},
        {"command": "true", "exclusive": "perhaps"},
        {"command": "true", "workdir": 5},
        {"command": "true", "runtime": "1e309"},
        {"command": [1, 2]},
        {"command": "x" * 70000},
        {"command": "'unclosed"},
        {"command": "true", "colour": "red"},
    ],
)
def test_submit_errors_are_in_words_not_the_validator_s(params: dict) -> None:
    with pytest.raises(SubmitError) as caught:
        parse_submit(params)
    for line in caught.value.errors:
        field, _, reason = line.partition(": ")
        assert field in params and reason, line
        for internal in ("Input should", "Value error", "valid integer", "unable to", "No closing", "[type="):
            assert internal not in line, line


def test_messages_put_every_validator_error_in_words() -> None:
    from broker.rest.messages import error_lines, reason

    def error(kind: str, msg: str, loc: tuple[str, ...] = ("body", "size"), **ctx: int) -> ErrorDetails:
        """One validator error as pydantic reports it (ctx only when the kind has one)."""
        details: ErrorDetails = {"type": kind, "loc": loc, "msg": msg, "input": None}
        if ctx:
            details["ctx"] = ctx
        return details

    assert reason(error("greater_than_equal", "Input should be >= 1", ge=1)) == "must be at least 1"
    too_long = error("string_too_long", "String should have at most 9 characters", max_length=9)
    assert reason(too_long) == "must be at most 9 characters long"
    assert reason(error("some_future_kind", "Input should be sparkly")) == (
        "has a value that is not accepted here"
    )  # an unknown kind never leaks the validator's text
    parsing = error("int_parsing", "Input should be a valid integer", ("query", "page"))
    assert error_lines([parsing]) == ["page: must be a whole number"]


def test_a_gpu_request_is_checked_against_the_cluster() -> None:
    from broker.rest.submit import check_gpus

    asks = parse_submit({"command": "true", "gpus_per_task": 2, "num_tasks": 3})
    check_gpus(parse_submit({"command": "true"}), 0)  # no GPUs asked: nothing to check
    check_gpus(asks, 6)
    with pytest.raises(SubmitError, match=r"^gpus_per_task: this cluster has no GPUs"):
        check_gpus(asks, 0)
    with pytest.raises(SubmitError, match=r"gpus_per_task: 3 tasks x 2 GPUs is 6; the cluster has 4"):
        check_gpus(asks, 4)


def test_the_builtin_service_lists_with_job_list_s_cap_unless_asked_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    """1,000 newest, flux-core's job-list default (the reference server's listing); `limit` changes it."""
    from broker.rest.jobs import JOB_LIST_LIMIT, BrokerJobService
    from broker.rest.per_thread import PerThread

    asked: list[int] = []

    class Client:
        def jobs(self, states: str, max_entries: int = 0) -> list:
            asked.append(max_entries)
            return []

        def close(self) -> None:
            pass

    service = BrokerJobService("local:///nowhere")
    monkeypatch.setattr(service, "_clients", PerThread(Client, Client.close))  # a stand-in for the broker's client
    service.jobs()
    service.jobs(limit=5000)
    assert JOB_LIST_LIMIT == 1000 and asked == [1000, 5000]
